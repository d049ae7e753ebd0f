/*
 * Gregor's driver of Kafka's Java client: one JVM per logical client, holding its
 * producers and consumers, driven by the Python facade (gregor_java/facade.py)
 * over stdin/stdout, one JSON object per line.
 *
 * Requests carry "op" and a handle "h"; those with an "id" get exactly one reply
 * line {"id": .., "ok": true, ...} or {"id": .., "ok": false, "error": {..}}, in
 * request order. "produce" has no id and no reply: its outcome comes back later as
 * a delivery event ("dr") inside the reply of a poll or flush. The driver never
 * writes a line it was not asked for, so the two pipes cannot deadlock. A poll or
 * flush that waits is answered by the thread whose delivery ends the wait (the
 * producer's I/O thread): one thread hand-off fewer per op, on a busy machine
 * about a millisecond.
 *
 * Errors are reported as facts (the exception chain with each class, its Kafka
 * protocol code and whether it is retriable; where it surfaced; the transaction
 * manager's state afterwards); the facade's one error table turns them into
 * librdkafka's error names. The producer id and epoch are read from the
 * producer's transaction manager by reflection: the Java client has no public
 * call for them.
 *
 * Only kafka-clients and its runtime dependencies are on the class path; the
 * JSON codec at the bottom is the driver's own.
 */

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class GregorKafkaDriver {
    private final Map<Long, Producing> producers = new HashMap<>();
    private final Map<Long, Consuming> consumers = new HashMap<>();
    private final BufferedWriter out;

    private GregorKafkaDriver(BufferedWriter out) {
        this.out = out;
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--train")) {
            train();
            System.exit(0);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        watchParent();
        GregorKafkaDriver driver = new GregorKafkaDriver(out);
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("ready", true);
        hello.put("version", clientVersion());
        hello.put("pid", ProcessHandle.current().pid());
        driver.write(hello);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            driver.handle(Json.parseObject(line));
        }
        // the facade is gone (its process died or closed the pipe): nothing to finish
        Runtime.getRuntime().halt(0);
    }

    /** Ends the JVM within 100 ms of its parent (the client process), whatever the main thread is doing. */
    private static void watchParent() {
        final Optional<ProcessHandle> parent = ProcessHandle.current().parent();
        if (!parent.isPresent()) return;
        Thread watch = new Thread(() -> {
            while (parent.get().isAlive()) {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
            Runtime.getRuntime().halt(0);
        }, "gregor-parent-watch");
        watch.setDaemon(true);
        watch.start();
    }

    /** kafka-clients' own version file (AppInfoParser, which reads it, moved packages in 4.4). */
    private static String clientVersion() {
        Properties p = new Properties();
        try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        } catch (IOException e) {
            // unknown
        }
        return p.getProperty("version", "unknown");
    }

    /** A reply already written by the thread that completed it (a waiting poll or flush). */
    private static final Object REPLIED = new Object();

    private void write(Map<String, Object> message) throws IOException {
        String line = Json.write(message);
        synchronized (out) {
            out.write(line);
            out.write('\n');
            out.flush();
        }
    }

    private void handle(Map<String, Object> req) throws IOException {
        String op = (String) req.get("op");
        Object id = req.get("id");
        Map<String, Object> reply = new LinkedHashMap<>();
        reply.put("id", id);
        try {
            if (op.equals("produce")) { // the hot path: no reply
                producer(req).produce(req);
                return;
            }
            Object result = dispatch(op, req, reply);
            if (result == REPLIED) return;
            reply.put("ok", true);
            if (result != null) reply.put("result", result);
        } catch (Failure failure) {
            reply.put("ok", false);
            reply.put("error", failure.report);
        } catch (RuntimeException e) {
            reply.put("ok", false);
            reply.put("error", report(e, "call", null));
        }
        if (id != null) write(reply);
    }

    private Object dispatch(String op, Map<String, Object> req, Map<String, Object> reply) {
        switch (op) {
            case "producer.new": {
                long h = num(req, "h");
                producers.put(h, new Producing(props(req), num(req, "stats_ms")));
                return null;
            }
            case "consumer.new": {
                long h = num(req, "h");
                consumers.put(h, new Consuming(props(req), req));
                return null;
            }
            case "exit":
                for (Producing p : producers.values()) p.closeNow();
                Runtime.getRuntime().halt(0);
                return null;
            case "producer.forget": { // the facade dropped it: closed at once, its handle gone
                Producing p = producers.remove(num(req, "h"));
                if (p != null) p.closeNow();
                return null;
            }
            default:
        }
        if (op.startsWith("producer.")) {
            Producing p = producer(req);
            return p.call(op.substring("producer.".length()), req, reply);
        }
        if (op.startsWith("consumer.")) {
            Consuming c = consumers.get(num(req, "h"));
            if (c == null) throw new IllegalStateException("no consumer " + req.get("h"));
            Object result = c.call(op.substring("consumer.".length()), req, reply);
            if (op.equals("consumer.close")) consumers.remove(num(req, "h"));
            return result;
        }
        throw new IllegalArgumentException("unknown op " + op);
    }

    private Producing producer(Map<String, Object> req) {
        Producing p = producers.get(num(req, "h"));
        if (p == null) throw new IllegalStateException("no producer " + req.get("h"));
        return p;
    }

    // ---------------------------------------------------------------- producers

    /** One KafkaProducer, its delivery events and its emulated statistics. */
    private final class Producing {
        final KafkaProducer<byte[], byte[]> producer;
        final Object txnManager; // null for a plain producer (idempotence off)
        final LinkedBlockingQueue<Map<String, Object>> events = new LinkedBlockingQueue<>();
        final Object lock = new Object();
        int outstanding;
        // a poll or flush waiting for deliveries (guarded by lock): the delivery that ends its wait answers it
        Map<String, Object> waiting;
        boolean waitingForAll; // flush: the last outstanding record; poll: any event
        volatile boolean closing;
        final long statsMs;
        long nextStats;
        final Thread caller = Thread.currentThread();
        Semaphore flushes; // started on the first flush

        Producing(Properties props, long statsMs) {
            this.producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
            this.txnManager = Internals.field(producer, "transactionManager");
            this.statsMs = statsMs;
            this.nextStats = System.currentTimeMillis() + statsMs;
        }

        void produce(Map<String, Object> req) {
            final Object m = req.get("m");
            Object p = req.get("p");
            Integer partition = p == null || ((Number) p).intValue() < 0 ? null : ((Number) p).intValue();
            Object ts = req.get("ts");
            ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                    (String) req.get("t"), partition, ts == null ? null : ((Number) ts).longValue(),
                    bytes(req.get("k")), bytes(req.get("v")));
            synchronized (lock) {
                outstanding++;
            }
            Callback done = (RecordMetadata md, Exception e) -> delivered(m, md, e);
            try {
                producer.send(record, done);
            } catch (RuntimeException e) {
                // refused before it was queued (a closed or failed producer): a delivery error
                delivered(m, null, new SyncSend(e));
            }
        }

        void delivered(Object m, RecordMetadata md, Exception e) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("e", "dr");
            ev.put("m", m);
            if (e == null) {
                ev.put("p", md.partition());
                ev.put("o", md.hasOffset() ? md.offset() : -1L);
            } else {
                boolean sync = e instanceof SyncSend || Thread.currentThread() == caller;
                Throwable cause = e instanceof SyncSend ? e.getCause() : e;
                Map<String, Object> err = report(cause, "delivery", this);
                err.put("sync", sync); // refused inside send(): never queued, never sent
                err.put("closing", closing);
                ev.put("err", err);
            }
            events.add(ev);
            Map<String, Object> answer = null;
            synchronized (lock) {
                outstanding--;
                if (waiting != null && (!waitingForAll || outstanding == 0)) {
                    answer = waiting;
                    waiting = null;
                    answer.put("events", drain());
                    answer.put("ok", true);
                    if (waitingForAll) answer.put("result", 0L);
                }
                lock.notifyAll();
            }
            if (answer != null) {
                try {
                    write(answer);
                } catch (IOException gone) {
                    // the facade is gone: the main thread sees its stdin close and halts
                }
            }
        }

        Object call(String op, Map<String, Object> req, Map<String, Object> reply) {
            switch (op) {
                case "poll":
                    return poll(seconds(req, "timeout"), reply);
                case "flush":
                    return flush(seconds(req, "timeout"), reply);
                case "init_transactions":
                    run(() -> producer.initTransactions());
                    return null;
                case "begin_transaction":
                    run(() -> producer.beginTransaction());
                    return null;
                case "commit_transaction":
                    run(() -> producer.commitTransaction());
                    return null;
                case "abort_transaction":
                    run(() -> producer.abortTransaction());
                    return null;
                case "send_offsets_to_transaction": {
                    Map<TopicPartition, OffsetAndMetadata> offsets = offsets(req.get("offsets"));
                    ConsumerGroupMetadata meta = groupMetadata(obj(req.get("group")));
                    run(() -> producer.sendOffsetsToTransaction(offsets, meta));
                    return null;
                }
                case "purge":
                    closeNow();
                    return null;
                case "ids":
                    return eos();
                default:
                    throw new IllegalArgumentException("unknown producer op " + op);
            }
        }

        /** A transactional call; its failure reported with the state it left behind. */
        void run(Runnable call) {
            try {
                call.run();
            } catch (RuntimeException e) {
                if (!(e instanceof RetriableException)) settle();
                throw new Failure(report(e, "call", this));
            }
        }

        /**
         * Waits (at most 1 s) for the transaction manager to leave a state in passing: a call can
         * throw before the sender thread has moved it to FATAL_ERROR or ABORTABLE_ERROR (seen with
         * ProducerFencedException under the classic protocol), and the flags are read from it.
         */
        void settle() {
            long until = System.currentTimeMillis() + 1000;
            while (System.currentTimeMillis() < until) {
                String s = state();
                if (s == null || !(s.equals("INITIALIZING") || s.endsWith("_TRANSACTION"))) return;
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }

        /** Waits for the first event (or the next statistics); REPLIED when the delivery that came answered. */
        Object poll(double timeoutS, Map<String, Object> reply) {
            long now = System.currentTimeMillis();
            long until = now + (long) (timeoutS * 1000);
            if (statsMs > 0) until = Math.min(until, Math.max(now, nextStats));
            synchronized (lock) {
                if (events.isEmpty() && await(false, reply, until)) return REPLIED;
                reply.put("events", drain());
            }
            return null;
        }

        /**
         * Under lock: leaves the reply to the delivery that ends the wait (the last outstanding record for
         * a flush, any for a poll), and waits until it did (true) or until the deadline (false: answer here).
         */
        boolean await(boolean forAll, Map<String, Object> reply, long until) {
            waiting = reply;
            waitingForAll = forAll;
            while (waiting != null) {
                long left = until - System.currentTimeMillis();
                if (left <= 0) break;
                try {
                    lock.wait(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            if (waiting == null) return true;
            waiting = null;
            return false;
        }

        List<Object> drain() {
            List<Object> got = new ArrayList<>();
            events.drainTo((Collection) got);
            long now = System.currentTimeMillis();
            if (statsMs > 0 && now >= nextStats) {
                Map<String, Object> stats = new LinkedHashMap<>();
                stats.put("e", "stats");
                stats.put("ts", now * 1000);
                stats.put("eos", eos());
                got.add(stats);
                nextStats = now + statsMs;
            }
            return got;
        }

        /** librdkafka's flush: what remains outstanding after at most timeoutS; REPLIED when the last delivery answered. */
        Object flush(double timeoutS, Map<String, Object> reply) {
            if (flushes == null) {
                flushes = new Semaphore(0);
                Thread flusher = new Thread(() -> {
                    while (!closing) {
                        try {
                            flushes.acquire();
                            flushes.drainPermits();
                            producer.flush(); // sends what lingers now; thread-safe
                        } catch (InterruptedException e) {
                            return;
                        } catch (RuntimeException e) {
                            // a closed or failed producer: the waits below see the outcome
                        }
                    }
                }, "gregor-flusher");
                flusher.setDaemon(true);
                flusher.start();
            }
            flushes.release();
            long until = System.currentTimeMillis() + (long) (timeoutS * 1000);
            synchronized (lock) {
                if (outstanding > 0 && await(true, reply, until)) return REPLIED;
                reply.put("events", drain());
                return (long) outstanding;
            }
        }

        /** librdkafka's statistics "eos" object, from the transaction manager's fields. */
        Map<String, Object> eos() {
            Map<String, Object> eos = new LinkedHashMap<>();
            String state = txnManager == null ? null : String.valueOf(Internals.field(txnManager, "currentState"));
            Object ids = txnManager == null ? null : Internals.field(txnManager, "producerIdAndEpoch");
            long pid = ids == null ? -1 : ((Number) Internals.field(ids, "producerId")).longValue();
            int epoch = ids == null ? -1 : ((Number) Internals.field(ids, "epoch")).intValue();
            eos.put("idemp_state", "FATAL_ERROR".equals(state) ? "FatalError" : pid >= 0 ? "Assigned" : "WaitPID");
            eos.put("txn_state", state);
            eos.put("producer_id", pid);
            eos.put("producer_epoch", epoch);
            Object v2 = txnManager == null ? null : Internals.field(txnManager, "isTransactionV2Enabled");
            eos.put("txn_version", v2 == null ? 1 : ((Boolean) v2 ? 2 : 1)); // clients before 4.0 lack the field
            return eos;
        }

        void closeNow() {
            if (closing) return;
            closing = true;
            if (flushes != null) flushes.release();
            try {
                producer.close(Duration.ZERO);
            } catch (RuntimeException e) {
                // already failed: nothing left to close
            }
        }

        String state() {
            return txnManager == null ? null : String.valueOf(Internals.field(txnManager, "currentState"));
        }
    }

    /** A send() that threw: the record never reached the accumulator. */
    private static final class SyncSend extends Exception {
        SyncSend(Throwable cause) {
            super(cause);
        }
    }

    // ---------------------------------------------------------------- consumers

    /** One KafkaConsumer, the records it fetched beyond what the caller took, and its rebalance events. */
    private final class Consuming implements ConsumerRebalanceListener {
        final KafkaConsumer<byte[], byte[]> consumer;
        final ArrayDeque<ConsumerRecord<byte[], byte[]>> buffer = new ArrayDeque<>();
        final List<Object> events = new ArrayList<>();
        final Map<TopicPartition, Long> handedOut = new HashMap<>(); // next offset after what the caller got
        final Map<TopicPartition, Long> autoCommitted = new HashMap<>();
        // group metadata snapshots handed out, by ref: the few latest (a transaction uses the one it just took)
        final Map<Long, ConsumerGroupMetadata> snapshots = new LinkedHashMap<Long, ConsumerGroupMetadata>() {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, ConsumerGroupMetadata> eldest) {
                return size() > 16;
            }
        };
        long nextMeta;
        final boolean autoCommit;
        final long autoCommitMs;
        long nextAutoCommit;

        Consuming(Properties props, Map<String, Object> req) {
            this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            this.autoCommit = Boolean.TRUE.equals(req.get("auto_commit"));
            this.autoCommitMs = req.get("auto_commit_ms") == null ? 5000 : num(req, "auto_commit_ms");
            this.nextAutoCommit = System.currentTimeMillis() + autoCommitMs;
        }

        Object call(String op, Map<String, Object> req, Map<String, Object> reply) {
            try {
                return perform(op, req, reply);
            } catch (RuntimeException e) {
                throw new Failure(report(e, "call", null));
            } finally {
                if (!events.isEmpty()) reply.put("events", new ArrayList<>(events));
                events.clear();
            }
        }

        Object perform(String op, Map<String, Object> req, Map<String, Object> reply) {
            switch (op) {
                case "assign": {
                    List<Object> parts = list(req.get("partitions"));
                    List<TopicPartition> tps = new ArrayList<>();
                    for (Object o : parts) tps.add(tp(obj(o)));
                    buffer.clear();
                    consumer.assign(tps);
                    for (Object o : parts) position(tp(obj(o)), num(obj(o), "offset"));
                    return null;
                }
                case "subscribe":
                    buffer.clear();
                    consumer.subscribe(strings(req.get("topics")), this);
                    return null;
                case "unsubscribe":
                    buffer.clear();
                    consumer.unsubscribe();
                    return null;
                case "consume":
                    return consume((int) num(req, "n"), seconds(req, "timeout"));
                case "commit": {
                    Map<TopicPartition, OffsetAndMetadata> offsets =
                            req.get("offsets") == null ? current(null) : offsets(req.get("offsets"));
                    try {
                        consumer.commitSync(offsets);
                    } catch (RuntimeException e) {
                        commitEvent(offsets, e);
                        throw e;
                    }
                    commitEvent(offsets, null);
                    return partitions(offsets);
                }
                case "seek": {
                    TopicPartition tp = tp(obj(req.get("partition")));
                    dropBuffered(java.util.Collections.singleton(tp));
                    position(tp, num(obj(req.get("partition")), "offset"));
                    return null;
                }
                case "position": {
                    List<Object> found = new ArrayList<>();
                    for (Object o : list(req.get("partitions"))) {
                        TopicPartition tp = tp(obj(o));
                        Map<String, Object> answer = part(tp, -1001L);
                        Long first = firstBuffered(tp);
                        if (first != null) {
                            answer.put("offset", first);
                        } else {
                            try {
                                answer.put("offset", consumer.position(tp, Duration.ZERO));
                            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                                // no position known yet: librdkafka's OFFSET_INVALID
                            } catch (IllegalStateException e) {
                                answer.put("error", report(e, "call", null));
                            }
                        }
                        found.add(answer);
                    }
                    return found;
                }
                case "watermarks": {
                    TopicPartition tp = tp(obj(req.get("partition")));
                    Duration timeout = Duration.ofMillis((long) (seconds(req, "timeout") * 1000));
                    List<TopicPartition> one = java.util.Collections.singletonList(tp);
                    long low = consumer.beginningOffsets(one, timeout).get(tp);
                    long high = consumer.endOffsets(one, timeout).get(tp);
                    List<Object> pair = new ArrayList<>();
                    pair.add(low);
                    pair.add(high);
                    return pair;
                }
                case "group_metadata": {
                    ConsumerGroupMetadata meta = consumer.groupMetadata();
                    long ref = ++nextMeta;
                    snapshots.put(ref, meta);
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("h", num(req, "h"));
                    m.put("ref", ref);
                    m.put("group", meta.groupId());
                    m.put("generation", meta.generationId());
                    m.put("member", meta.memberId());
                    m.put("instance", meta.groupInstanceId().orElse(null));
                    return m;
                }
                case "close":
                    if (autoCommit) autoCommitNow(true);
                    consumer.close(Duration.ofMillis((long) (seconds(req, "timeout") * 1000)));
                    return null;
                default:
                    throw new IllegalArgumentException("unknown consumer op " + op);
            }
        }

        void position(TopicPartition tp, long offset) {
            if (offset == -2) consumer.seekToBeginning(java.util.Collections.singleton(tp));
            else if (offset == -1) consumer.seekToEnd(java.util.Collections.singleton(tp));
            else if (offset >= 0) consumer.seek(tp, offset);
            // -1000 (stored) and -1001 (invalid): the committed offset or auto.offset.reset decides
        }

        /** librdkafka's consume(): up to n records, waiting until n or the timeout. */
        List<Object> consume(int n, double timeoutS) {
            long until = System.currentTimeMillis() + (long) (timeoutS * 1000);
            boolean polled = false;
            while (buffer.size() < n) {
                long left = until - System.currentTimeMillis();
                if (left <= 0 && polled) break;
                ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(Math.max(0, left)));
                polled = true;
                for (ConsumerRecord<byte[], byte[]> r : got) buffer.add(r);
                if (autoCommit) autoCommitNow(false);
            }
            List<Object> messages = new ArrayList<>();
            while (messages.size() < n && !buffer.isEmpty()) {
                ConsumerRecord<byte[], byte[]> r = buffer.poll();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("t", r.topic());
                m.put("p", r.partition());
                m.put("o", r.offset());
                m.put("k", text(r.key()));
                m.put("v", text(r.value()));
                m.put("ts", r.timestamp());
                messages.add(m);
                handedOut.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
            }
            return messages;
        }

        /** librdkafka's auto commit: the positions handed out, when they moved, every interval (and on revoke). */
        void autoCommitNow(boolean sync) {
            long now = System.currentTimeMillis();
            if (!sync && now < nextAutoCommit) return;
            nextAutoCommit = now + autoCommitMs;
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (Map.Entry<TopicPartition, Long> e : handedOut.entrySet()) {
                if (!e.getValue().equals(autoCommitted.get(e.getKey())) && consumer.assignment().contains(e.getKey())) {
                    offsets.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
                }
            }
            if (offsets.isEmpty()) return;
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                autoCommitted.put(e.getKey(), e.getValue().offset());
            }
            if (sync) {
                try {
                    consumer.commitSync(offsets);
                    commitEvent(offsets, null);
                } catch (RuntimeException e) {
                    commitEvent(offsets, e);
                }
            } else {
                consumer.commitAsync(offsets, (done, e) -> commitEvent(offsets, e));
            }
        }

        void commitEvent(Map<TopicPartition, OffsetAndMetadata> offsets, Exception e) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("e", "commit");
            ev.put("partitions", partitions(offsets));
            if (e != null) ev.put("err", report(e, "commit", null));
            events.add(ev);
        }

        Map<TopicPartition, OffsetAndMetadata> current(Collection<TopicPartition> only) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (Map.Entry<TopicPartition, Long> e : handedOut.entrySet()) {
                if (only == null || only.contains(e.getKey())) offsets.put(e.getKey(), new OffsetAndMetadata(e.getValue()));
            }
            return offsets;
        }

        Long firstBuffered(TopicPartition tp) {
            for (ConsumerRecord<byte[], byte[]> r : buffer) {
                if (r.partition() == tp.partition() && r.topic().equals(tp.topic())) return r.offset();
            }
            return null;
        }

        void dropBuffered(Collection<TopicPartition> tps) {
            Iterator<ConsumerRecord<byte[], byte[]>> it = buffer.iterator();
            while (it.hasNext()) {
                ConsumerRecord<byte[], byte[]> r = it.next();
                if (tps.contains(new TopicPartition(r.topic(), r.partition()))) it.remove();
            }
        }

        void rebalance(String kind, Collection<TopicPartition> tps) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("e", kind);
            List<Object> parts = new ArrayList<>();
            for (TopicPartition tp : tps) parts.add(part(tp, -1001L));
            ev.put("partitions", parts);
            events.add(ev);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> tps) {
            dropBuffered(tps);
            if (autoCommit) autoCommitNow(true);
            for (TopicPartition tp : tps) handedOut.remove(tp);
            rebalance("revoke", tps);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> tps) {
            rebalance("assign", tps);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> tps) {
            dropBuffered(tps);
            for (TopicPartition tp : tps) handedOut.remove(tp);
            rebalance("lost", tps);
        }
    }

    // ---------------------------------------------------------------- errors

    /** A failed request, already reported. */
    private static final class Failure extends RuntimeException {
        final Map<String, Object> report;

        Failure(Map<String, Object> report) {
            super(null, null, false, false);
            this.report = report;
        }
    }

    /** The facts of an exception: its chain (class, protocol code, retriable), where, the producer's state. */
    private static Map<String, Object> report(Throwable e, String where, Producing producing) {
        Map<String, Object> r = new LinkedHashMap<>();
        List<Object> chain = new ArrayList<>();
        for (Throwable t = e; t != null && chain.size() < 5; t = t.getCause() == t ? null : t.getCause()) {
            Map<String, Object> link = new LinkedHashMap<>();
            link.put("class", t.getClass().getSimpleName());
            Errors code = Errors.forException(t);
            link.put("code", code.code());
            link.put("code_name", code.name());
            link.put("retriable", t instanceof RetriableException);
            link.put("message", String.valueOf(t.getMessage()));
            chain.add(link);
        }
        r.put("chain", chain);
        r.put("where", where);
        if (producing != null) r.put("txn_state", producing.state());
        return r;
    }

    // ---------------------------------------------------------------- internals

    /** Reflection on kafka-clients' private fields: names checked on 3.8.0 to 4.4.0. */
    static final class Internals {
        static Object field(Object target, String name) {
            for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
                try {
                    Field f = c.getDeclaredField(name);
                    f.setAccessible(true);
                    return f.get(target);
                } catch (NoSuchFieldException e) {
                    // look in the superclass
                } catch (ReflectiveOperationException | RuntimeException e) {
                    return null;
                }
            }
            return null;
        }
    }

    // ---------------------------------------------------------------- conversions

    private static Properties props(Map<String, Object> req) {
        Properties props = new Properties();
        for (Map.Entry<String, Object> e : obj(req.get("conf")).entrySet()) {
            props.put(e.getKey(), String.valueOf(e.getValue()));
        }
        return props;
    }

    /** Bytes travel as text whose chars are the byte values (0-255): JSON keeps them exact. */
    private static byte[] bytes(Object text) {
        if (text == null) return null;
        String s = (String) text;
        byte[] b = new byte[s.length()];
        for (int i = 0; i < b.length; i++) b[i] = (byte) s.charAt(i);
        return b;
    }

    private static String text(byte[] b) {
        if (b == null) return null;
        char[] c = new char[b.length];
        for (int i = 0; i < b.length; i++) c[i] = (char) (b[i] & 0xff);
        return new String(c);
    }

    private static TopicPartition tp(Map<String, Object> o) {
        return new TopicPartition((String) o.get("t"), ((Number) o.get("p")).intValue());
    }

    private static Map<String, Object> part(TopicPartition tp, long offset) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("t", tp.topic());
        m.put("p", tp.partition());
        m.put("offset", offset);
        return m;
    }

    private static List<Object> partitions(Map<TopicPartition, OffsetAndMetadata> offsets) {
        List<Object> parts = new ArrayList<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            parts.add(part(e.getKey(), e.getValue().offset()));
        }
        return parts;
    }

    private static Map<TopicPartition, OffsetAndMetadata> offsets(Object list) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (Object o : list(list)) offsets.put(tp(obj(o)), new OffsetAndMetadata(num(obj(o), "offset")));
        return offsets;
    }

    /** The snapshot a consumer of this JVM took (librdkafka's consumer_group_metadata()). */
    private ConsumerGroupMetadata groupMetadata(Map<String, Object> m) {
        Consuming c = consumers.get(num(m, "h"));
        ConsumerGroupMetadata meta = c == null ? null : c.snapshots.get(num(m, "ref"));
        if (meta == null) throw new IllegalStateException("no group metadata " + m + " in this JVM");
        return meta;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> obj(Object o) {
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o) {
        return (List<Object>) o;
    }

    private static List<String> strings(Object o) {
        List<String> s = new ArrayList<>();
        for (Object x : list(o)) s.add((String) x);
        return s;
    }

    private static long num(Map<String, Object> m, String key) {
        Object v = m.get(key);
        return v == null ? 0 : ((Number) v).longValue();
    }

    private static double seconds(Map<String, Object> m, String key) {
        Object v = m.get(key);
        return v == null ? 0 : ((Number) v).doubleValue();
    }

    // ---------------------------------------------------------------- CDS training

    /** Loads the classes a client needs (nothing is reachable), for -XX:ArchiveClassesAtExit. */
    private static void train() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", "127.0.0.1:1");
        p.put("max.block.ms", "200");
        p.put("enable.idempotence", "true");
        p.put("transactional.id", "gregor-train");
        GregorKafkaDriver driver = new GregorKafkaDriver(new BufferedWriter(new OutputStreamWriter(System.err)));
        Producing producing = driver.new Producing(p, 0);
        producing.produce(Json.parseObject("{\"m\":1,\"t\":\"train\",\"p\":0,\"k\":\"1\",\"v\":\"2\"}"));
        try {
            producing.producer.initTransactions();
        } catch (RuntimeException e) {
            report(e, "call", producing);
        }
        producing.eos();
        producing.flush(0.05, new LinkedHashMap<>());
        producing.drain();
        Properties c = new Properties();
        c.put("bootstrap.servers", "127.0.0.1:1");
        c.put("group.id", "gregor-train");
        c.put("enable.auto.commit", "false");
        Map<String, Object> req = Json.parseObject("{\"auto_commit\":false}");
        Consuming consuming = driver.new Consuming(c, req);
        consuming.consumer.assign(java.util.Collections.singletonList(new TopicPartition("train", 0)));
        consuming.consume(10, 0.1);
        Json.write(consuming.perform("group_metadata", req, new LinkedHashMap<>()));
        producing.closeNow();
        consuming.consumer.close(Duration.ZERO);
    }

    // ---------------------------------------------------------------- JSON

    /** A small JSON codec: objects, arrays, strings, numbers (long or double), booleans, null. */
    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> parseObject(String text) {
            Json j = new Json(text);
            Object v = j.value();
            if (!(v instanceof Map)) throw new IllegalArgumentException("not a JSON object: " + text);
            return (Map<String, Object>) v;
        }

        private void space() {
            while (i < s.length() && s.charAt(i) <= ' ') i++;
        }

        private Object value() {
            space();
            char c = s.charAt(i);
            if (c == '{') {
                i++;
                Map<String, Object> m = new LinkedHashMap<>();
                space();
                if (s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    m.put(key, value());
                    space();
                    if (s.charAt(i) == ',') {
                        i++;
                    } else {
                        expect('}');
                        return m;
                    }
                }
            }
            if (c == '[') {
                i++;
                List<Object> l = new ArrayList<>();
                space();
                if (s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    space();
                    if (s.charAt(i) == ',') {
                        i++;
                    } else {
                        expect(']');
                        return l;
                    }
                }
            }
            if (c == '"') return string();
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String num = s.substring(start, i);
            if (num.isEmpty()) throw new IllegalArgumentException("bad JSON at " + start);
            if (num.contains(".") || num.contains("e") || num.contains("E")) return Double.parseDouble(num);
            return Long.parseLong(num);
        }

        private void expect(char c) {
            if (s.charAt(i) != c) throw new IllegalArgumentException("expected " + c + " at " + i);
            i++;
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u':
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                        break;
                    default: b.append(e); // \" \\ \/
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        @SuppressWarnings("unchecked")
        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof String) {
                quote(b, (String) v);
            } else if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else if (v instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                    if (!first) b.append(',');
                    first = false;
                    quote(b, e.getKey());
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof Collection) {
                b.append('[');
                boolean first = true;
                for (Object o : (Collection<Object>) v) {
                    if (!first) b.append(',');
                    first = false;
                    write(b, o);
                }
                b.append(']');
            } else {
                quote(b, String.valueOf(v));
            }
        }

        private static void quote(StringBuilder b, String s) {
            b.append('"');
            for (int k = 0; k < s.length(); k++) {
                char c = s.charAt(k);
                if (c == '"' || c == '\\') {
                    b.append('\\').append(c);
                } else if (c < 0x20 || c > 0x7e) {
                    b.append(String.format("\\u%04x", (int) c));
                } else {
                    b.append(c);
                }
            }
            b.append('"');
        }
    }
}
