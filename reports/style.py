"""The page's inline CSS (one string, so the report stays a single file)."""

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f7f9}
section,.notes,nav,footer{margin:0 24px}
h2{font-size:20px;margin:28px 0 10px;border-bottom:2px solid #ddd;padding-bottom:4px}
h3{font-size:16px;margin:14px 0 6px}
.banner{display:flex;gap:22px;align-items:center;padding:22px 28px;color:#fff}
.banner .icon{font-size:64px;line-height:1;font-weight:bold;width:70px;text-align:center}
.banner .headline{font-size:36px;font-weight:800;letter-spacing:.5px}
.banner .reason{font-size:19px;margin-top:4px}
.banner .first{font-size:16px;margin-top:4px}
.banner .first a{color:inherit}
.banner .which{font-size:13px;opacity:.85;margin-top:6px;word-break:break-all}
.banner.valid{background:#1e7e34}
.banner.invalid{background:#c0172b}
.banner.unknown{background:#e0a800;color:#1d1d1f}
nav{padding:8px 0;font-size:13px}
nav a{margin-right:14px;color:#0b5cad;text-decoration:none}
.notes{background:#fff4d6;border:1px solid #e0a800;padding:8px 14px;border-radius:6px;margin-top:8px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:6px}
.kv{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:6px 10px}
.kv .k{font-size:11px;color:#666;text-transform:uppercase;letter-spacing:.4px}
.kv .v{font-size:15px;font-weight:600;word-break:break-word}
.missing{color:#999;font-weight:normal;font-style:italic}
table{border-collapse:collapse;background:#fff;margin:6px 0}
th,td{border:1px solid #e1e4e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-size:12px}
table.summary td:nth-child(2){white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
table.summary tr.bad td{background:#fdecee}
table.summary tr.permitted td{color:#555}
.badge{display:inline-block;font-size:11px;font-weight:800;padding:2px 7px;border-radius:4px;color:#fff;
 vertical-align:middle}
.badge.bad{background:#c0172b}
.badge.permitted{background:#7f8c8d}
.anomaly{background:#fff;border:1px solid #e1e4e8;border-left:8px solid #c0172b;border-radius:6px;
 padding:6px 16px 12px;margin:12px 0}
.anomaly.permitted{border-left-color:#9aa5ad;background:#fafbfc}
.anomaly .count{font-size:15px;color:#444;font-weight:normal}
.explain{font-size:15px;margin:4px 0}
.anomaly.bad .why{color:#c0172b;font-weight:600}
.anomaly.permitted .why{color:#555}
.desc,.note,.caption{color:#555;font-size:13px}
.known-finding{background:#e8f1fb;border-left:4px solid #2c6fbb;padding:4px 10px;font-size:13px}
.good{color:#1e7e34;font-weight:600}
ul.ops{margin:0;padding-left:16px;font-size:12px}
.mops{color:#555;font-family:ui-monospace,monospace}
.value,.cycle{font-family:ui-monospace,monospace;word-break:break-all}
.err{color:#c0172b;font-family:ui-monospace,monospace}
.outcome{font-weight:700}
.outcome.ok{color:#1e7e34}.outcome.fail{color:#c0172b}.outcome.info{color:#b07d00}
.partition{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:4px 14px 10px;margin:10px 0;
 overflow-x:auto}
.legend{font-size:12px;margin:6px 0}
.swatch{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle;border:1px solid #999}
.chartrow svg{max-width:100%;height:auto}
.tl svg{max-width:100%;height:auto}
.chartrow{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:6px;margin:10px 0;overflow-x:auto}
svg text{font-family:system-ui,sans-serif}
.tl{overflow-x:auto}
details summary{cursor:pointer;font-weight:600;margin:6px 0}
.evidence{margin:2px 0 6px}
table.batches{font-size:12px}
table.batches tr.holds td{background:#fff1a8;font-weight:600}
table.batches tr.ends td{background:#d6e9ff}
table.batches td.marker{font-weight:700}
footer{color:#888;font-size:12px;padding:30px 0}
"""
