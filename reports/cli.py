"""`gregor report DIR` and `gregor index STORE`."""

from __future__ import annotations

from pathlib import Path

from ground.errors import GregorError


def store_of(run_dir: Path) -> Path | None:
    """The store a run directory store/<test>/<time> belongs to, if it looks like one.

    Only a directory named `store`, or one that already has an index.html or
    a `latest` link, counts: a run copied to /tmp/x must not make us index /.
    """
    store = run_dir.resolve().parent.parent
    if store == store.parent or not store.is_dir():
        return None
    if store.name == "store" or (store / "index.html").exists() or (store / "latest").is_symlink():
        return store
    return None


def publish(run_dir, progress=print, index: bool = True) -> Path:
    """report.html + junit.xml into run_dir, then the store's index.html; returns the page.

    The one call `gregor run` makes at its end (after `gregor check`).
    """
    from reports.index import write_index
    from reports.junit import write_junit
    from reports.render import write_report

    run_dir = Path(run_dir)
    page = write_report(run_dir, progress=progress)
    junit = write_junit(run_dir)
    progress(f"report: wrote {junit}")
    store = store_of(run_dir)
    if not index:
        pass
    elif store is not None:
        progress(f"report: wrote {write_index(store)}")
    else:
        progress(f"report: {run_dir} is not inside a store (store/<test>/<time>); index not refreshed")
    return page


def report_command(args) -> int:
    page = publish(args.dir, progress=print, index=not args.no_index)
    print(f"report: open file://{page.resolve()}")
    return 0


def index_command(args) -> int:
    from reports.index import write_index

    store = Path(args.store)
    if not store.is_dir():
        raise GregorError(f"{store} is not a directory; give the store directory (e.g. store/)")
    print(f"index: wrote {write_index(store)}")
    return 0


def register(subparsers) -> None:
    report = subparsers.add_parser("report", help="write report.html and junit.xml for a run directory")
    report.add_argument("dir", help="run directory, e.g. store/<test>/<time>")
    report.add_argument("--no-index", action="store_true", help="do not refresh the store's index.html")
    report.set_defaults(func=report_command)
    index = subparsers.add_parser("index", help="write index.html listing every run of a store")
    index.add_argument("store", help="store directory, e.g. store/")
    index.set_defaults(func=index_command)
