// The queue workload's clients as the Java client (org.apache.kafka:kafka-clients) runs them.
//
// Built and driven by faultline/workloads/java_client.py, which documents the protocol:
// settings as key=value arguments; every op printed on stdout as one JSON line, an
// invoke before the client is asked to do it and its completion when the client says
// how it ended, each line with "ns", System.nanoTime() when printed (the history's
// clock: CLOCK_MONOTONIC, so an op is journaled at when it happened, not when read);
// the Python side classifies sends (outcomes.py, the same rules as for librdkafka) and
// journals every line in the order printed. End of stdin: stop issuing
// ops, complete every outstanding send, close every client, print {"f":"exit"}, exit 0.
// The run that reads the ops is this process's parent: should it die (SIGKILL), nobody
// journals them and no cleanup knows this process, so it halts at once (watchParent).
//
// The "workload" setting: "queue" (the default), whose consumers assign every partition;
// "txn", whose producers are transactional (TxnProducer.java), its consumers the queue's;
// "group", whose consumers are GroupConsumers (GroupConsumer.java).
//
// Roles (the "role" setting): "all" (the default) runs every producer and consumer in this
// JVM; "producer" runs the one producer "index" from process "first_process"; "consumers"
// runs the consumers; "consumer" runs the one group member of slot "index" from process
// "first_process" (workload "group"), which an 'l' byte on stdin has leave at once. A run
// that crashes clients runs one JVM per producer and one for the consumers (or one per
// group member), which take process numbers and values from the file "counters" (two
// big-endian longs, next process and next value, taken under an fcntl lock that the
// harness takes too); a producer JVM then waits, after printing each invoke (of a send or
// a transaction), until the run says it journaled it (a '+' byte on stdin) before it
// sends, so that no consumer JVM can read a value whose invoke is not yet journaled; an
// 's' byte stops its clients, the end of stdin too.
//
// Processes: producers 0..N-1, consumers N..N+M-1; a client instance with a failed
// send (producer) or a poll that threw (consumer) is retired and its successor takes
// the next number; a retired producer is closed in the background once its outstanding
// sends complete (close bounded as at the end). Values: 0, 1, 2, ... unique within the run.

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class FaultlineClient {
    static final int MAX_OUTSTANDING = 5000;
    static final int POLL_MAX_RECORDS = 1000;

    static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    static final AtomicBoolean STOP = new AtomicBoolean();
    /** Set (before STOP) by an 'l' on stdin: group members leave at once, no settling. */
    static final AtomicBoolean LEAVE = new AtomicBoolean();
    static final int PROCESSES = 0, VALUES = 1;
    /** The counters in this JVM (role "all"), by PROCESSES and VALUES. */
    static final AtomicLong[] COUNTERS = {new AtomicLong(), new AtomicLong()};
    /** The counters' file shared by the run's JVMs and the harness; null: COUNTERS. */
    static FileChannel shared;
    /** Invokes the run has journaled and no send has waited for; null: nothing waits. */
    static Semaphore journaled;
    static Map<String, String> conf;

    /** Take n from counter `which` (PROCESSES or VALUES): its value before. */
    static long take(int which, long n) {
        if (shared == null) return COUNTERS[which].getAndAdd(n);
        synchronized (COUNTERS) {  // one FileLock per JVM at a time
            try (FileLock lock = shared.lock()) {
                ByteBuffer b = ByteBuffer.allocate(8);
                shared.read(b, which * 8L);
                long value = b.flip().getLong();
                shared.write(b.clear().putLong(value + n).flip(), which * 8L);
                return value;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** Print one JSON object of these fields and "ns", the time now: under the lock that
     *  orders the lines, so their times never decrease. */
    static synchronized void emit(String fields) {
        OUT.println("{" + fields + ",\"ns\":" + System.nanoTime() + "}");
        OUT.flush();
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /** An op line's fields, for emit. */
    static String op(int process, String type, String f, String value, String error) {
        return "\"process\":" + process + ",\"type\":\"" + type + "\",\"f\":\"" + f + "\",\"value\":"
                + value + (error == null ? "" : ",\"error\":" + str(error));
    }

    /** The Kafka error name of a send's or poll's exception (Errors' names for API errors). */
    static String errorName(Throwable e) {
        if (e instanceof ApiException) return Errors.forException(e).name();
        return "_" + e.getClass().getSimpleName();
    }

    /** A record value as JSON, exactly as clients.decode_value journals it (docs/history.md):
     *  a canonical ASCII decimal up to Long.MAX_VALUE as a number, null as null, anything
     *  else as its UTF-8 text with each byte of no valid sequence written as \\xNN. */
    static String decode(byte[] raw) {
        if (raw == null) return "null";
        boolean digits = raw.length > 0 && raw.length <= 19 && (raw[0] != '0' || raw.length == 1);
        for (int i = 0; digits && i < raw.length; i++) digits = raw[i] >= '0' && raw[i] <= '9';
        String ascii = new String(raw, StandardCharsets.ISO_8859_1);
        if (digits && (raw.length < 19 || ascii.compareTo(Long.toString(Long.MAX_VALUE)) <= 0)) {
            return ascii;
        }
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < raw.length; ) {
            int n = utf8Length(raw, i);
            if (n > 0) {
                text.append(new String(raw, i, n, StandardCharsets.UTF_8));
                i += n;
            } else {
                text.append(String.format("\\x%02x", raw[i++] & 0xff));
            }
        }
        return str(text.toString());
    }

    /** The length of the well-formed UTF-8 sequence at raw[i] (Unicode's table 3-7, which
     *  Python's decoder holds to), or 0 when none starts there. */
    static int utf8Length(byte[] raw, int i) {
        int b = raw[i] & 0xff;
        int n, lo = 0x80, hi = 0xbf;
        if (b < 0x80) return 1;
        else if (b >= 0xc2 && b <= 0xdf) n = 2;
        else if (b >= 0xe0 && b <= 0xef) {
            n = 3;
            if (b == 0xe0) lo = 0xa0;
            if (b == 0xed) hi = 0x9f;
        } else if (b >= 0xf0 && b <= 0xf4) {
            n = 4;
            if (b == 0xf0) lo = 0x90;
            if (b == 0xf4) hi = 0x8f;
        } else return 0;
        if (i + n > raw.length) return 0;
        for (int k = 1; k < n; k++) {
            int c = raw[i + k] & 0xff;
            if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xbf)) return 0;
        }
        return n;
    }

    static Properties common(String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", conf.get("bootstrap"));
        p.put("client.id", clientId);
        p.put("reconnect.backoff.max.ms", "1000");
        p.put("metadata.max.age.ms", "5000");
        return p;
    }

    // -- producers --------------------------------------------------------------------------

    static final class Producer implements Runnable {
        final int index;
        final int partitions = Integer.parseInt(conf.get("partitions"));
        final double rate = Double.parseDouble(conf.get("rate"));
        final Duration bound = Duration.ofMillis(Long.parseLong(conf.get("delivery_timeout_ms"))
                + Long.parseLong(conf.get("request_timeout_ms")) + 5000);
        /** Each closes a retired instance once its outstanding sends completed (as the
         *  librdkafka workload drops a retired instance): kept open to the end, every one
         *  held its network thread, connections and buffers for the rest of the run. */
        final List<Thread> closers = new ArrayList<>();
        final int first;

        Producer(int index, int first) {
            this.index = index;
            this.first = first;
        }

        KafkaProducer<byte[], byte[]> open(int process) {
            Properties p = common("faultline-p" + process);
            p.put("acks", conf.get("acks"));
            p.put("enable.idempotence", conf.get("idempotence"));
            p.put("retries", conf.get("retries"));
            p.put("max.in.flight.requests.per.connection", conf.get("max_in_flight"));
            p.put("delivery.timeout.ms", conf.get("delivery_timeout_ms"));
            p.put("request.timeout.ms", conf.get("request_timeout_ms"));
            p.put("linger.ms", conf.get("linger_ms"));
            // send() waits for metadata at most as long as a send may take in all
            p.put("max.block.ms", conf.get("delivery_timeout_ms"));
            return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        }

        @Override
        public void run() {
            String topic = conf.get("topic");
            int budget = Math.max(1, MAX_OUTSTANDING / partitions);
            int process = first;
            AtomicBoolean retired = new AtomicBoolean();
            KafkaProducer<byte[], byte[]> producer = open(process);
            Semaphore[] room = new Semaphore[partitions];
            for (int i = 0; i < partitions; i++) room[i] = new Semaphore(budget);
            int next = index % partitions;
            long interval = rate > 0 ? (long) (1e9 / rate) : 0;
            long due = System.nanoTime();
            while (!STOP.get()) {
                if (retired.get()) {
                    KafkaProducer<byte[], byte[]> old = producer;
                    Thread closer = new Thread(() -> old.close(bound), "close-p" + process);
                    closer.start();
                    closers.removeIf(t -> !t.isAlive());
                    closers.add(closer);
                    process = (int) take(PROCESSES, 1);
                    retired = new AtomicBoolean();
                    producer = open(process);
                }
                if (interval > 0) {
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        sleepNanos(Math.min(wait, 50_000_000L));
                        continue;
                    }
                    due = Math.max(due + interval, System.nanoTime() - 1_000_000_000L);
                }
                int partition = -1;
                for (int k = 0; k < partitions && partition < 0; k++) {
                    int candidate = (next + k) % partitions;
                    if (room[candidate].tryAcquire()) partition = candidate;
                }
                if (partition < 0) {
                    sleepNanos(1_000_000L);
                    continue;
                }
                next = (partition + 1) % partitions;
                long value = take(VALUES, 1);
                String v = "{\"topic\":" + str(topic) + ",\"partition\":" + partition + ",\"value\":" + value;
                // A failed send's callback retires the process under this lock, on the
                // client's thread: no invoke of it may follow that completion.
                synchronized (retired) {
                    if (retired.get()) {
                        room[partition].release();
                        continue;
                    }
                    emit(op(process, "invoke", "send", v + "}", null));
                }
                if (journaled != null) journaled.acquireUninterruptibly();
                final int proc = process;
                final int part = partition;
                final AtomicBoolean mine = retired;
                try {
                    producer.send(new ProducerRecord<>(topic, partition, null,
                            Long.toString(value).getBytes(StandardCharsets.US_ASCII)), (meta, e) -> {
                        room[part].release();
                        if (e == null) {
                            emit(op(proc, "done", "send", v + ",\"offset\":" + meta.offset() + "}", null));
                        } else {
                            synchronized (mine) {
                                mine.set(true);
                                emit(op(proc, "done", "send", v + "}", errorName(e)));
                            }
                        }
                    });
                } catch (RuntimeException e) {
                    room[part].release();
                    retired.set(true);
                    emit(op(proc, "refused", "send", v + "}", errorName(e)));
                }
            }
            producer.close(bound);
            for (Thread closer : closers) {
                try {
                    closer.join();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    // -- consumers --------------------------------------------------------------------------

    /** A consumer of process `process`: no auto commit, read from the log start. */
    static KafkaConsumer<byte[], byte[]> newConsumer(int process, Map<String, String> extra) {
        Properties p = common("faultline-c" + process);
        p.put("enable.auto.commit", "false");
        // as the librdkafka consumers (clients.consumer_config): a position past a truncated
        // log end re-reads from the start, instead of the Java default's jump to the end
        p.put("auto.offset.reset", "earliest");
        p.put("isolation.level", conf.get("isolation_level"));
        p.put("max.poll.records", Integer.toString(POLL_MAX_RECORDS));
        p.put("fetch.max.wait.ms", "100");
        p.putAll(extra);
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** A poll's records as its ok line's value: {"records": [[topic, partition, offset, value]]}. */
    static String records(ConsumerRecords<byte[], byte[]> records) {
        StringBuilder b = new StringBuilder("{\"records\":[");
        boolean comma = false;
        for (ConsumerRecord<byte[], byte[]> r : records) {
            if (comma) b.append(',');
            comma = true;
            b.append('[').append(str(r.topic())).append(',').append(r.partition()).append(',')
                    .append(r.offset()).append(',').append(decode(r.value())).append(']');
        }
        return b.append("]}").toString();
    }

    static KafkaConsumer<byte[], byte[]> openConsumer(int process, String topic, int partitions) {
        KafkaConsumer<byte[], byte[]> c = newConsumer(process, Map.of());
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        c.assign(tps);
        c.seekToBeginning(tps);
        return c;
    }

    static void consume(int first) {
        String topic = conf.get("topic");
        int partitions = Integer.parseInt(conf.get("partitions"));
        int process = first;
        KafkaConsumer<byte[], byte[]> consumer = openConsumer(process, topic, partitions);
        while (!STOP.get()) {
            emit(op(process, "invoke", "poll", "null", null));
            ConsumerRecords<byte[], byte[]> records;
            try {
                records = consumer.poll(Duration.ofMillis(100));
            } catch (RuntimeException e) {
                emit(op(process, "info", "poll", "null", errorName(e)));
                consumer.close(Duration.ofSeconds(5));
                process = (int) take(PROCESSES, 1);
                consumer = openConsumer(process, topic, partitions);
                continue;
            }
            emit(op(process, "ok", "poll", records(records), null));
        }
        consumer.close(Duration.ofSeconds(5));
    }

    static void sleepNanos(long nanos) {
        try {
            Thread.sleep(nanos / 1_000_000L, (int) (nanos % 1_000_000L));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Halt once the parent (the run, pid "parent" if given) is gone: a dead parent's
     *  children are handed to another, so the parent's pid changes (given, a parent gone
     *  before this JVM started is seen too). Without, a run killed with sends in flight
     *  left this process sending for up to a delivery timeout, journaled by nobody. */
    static void watchParent(String given) {
        long parent = given != null ? Long.parseLong(given)
                : ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
        Thread watcher = new Thread(() -> {
            while (ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L) == parent) {
                sleepNanos(100_000_000L);
            }
            Runtime.getRuntime().halt(3);
        }, "parent-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    /** Read stdin until its end: in a producer JVM, each '+' lets one send go and 's'
     *  stops; else an 'l' stops with LEAVE, any other byte is ignored. At the end, no send
     *  waits. */
    static void readStdin() throws IOException {
        if (journaled != null) {
            for (int b; (b = System.in.read()) != -1; ) {
                if (b == '+') journaled.release();
                else if (b == 's') STOP.set(true);
            }
            STOP.set(true);
            journaled.release(MAX_OUTSTANDING);
            return;
        }
        for (int b; (b = System.in.read()) != -1; ) {
            if (b == 'l') {
                LEAVE.set(true);
                STOP.set(true);
            }
        }
        STOP.set(true);
    }

    public static void main(String[] args) throws Exception {
        conf = new HashMap<>();
        for (String a : args) {
            int eq = a.indexOf('=');
            conf.put(a.substring(0, eq), a.substring(eq + 1));
        }
        watchParent(conf.get("parent"));
        String role = conf.getOrDefault("role", "all");
        int producers = Integer.parseInt(conf.get("producers"));
        int consumers = Integer.parseInt(conf.get("consumers"));
        if (conf.containsKey("counters")) {
            shared = FileChannel.open(Path.of(conf.get("counters")), StandardOpenOption.READ,
                    StandardOpenOption.WRITE);
        } else {
            COUNTERS[PROCESSES].set(Long.parseLong(conf.get("first_free_process")));
        }
        List<Thread> threads = new ArrayList<>();
        boolean txn = conf.getOrDefault("workload", "queue").equals("txn");
        if (role.equals("producer")) {
            journaled = new Semaphore(0);
            int index = Integer.parseInt(conf.get("index"));
            int first = Integer.parseInt(conf.get("first_process"));
            threads.add(new Thread(txn ? new TxnProducer(index, first) : new Producer(index, first),
                    "producer-" + index));
        }
        for (int i = 0; i < producers && role.equals("all"); i++) {
            threads.add(new Thread(txn ? new TxnProducer(i, i) : new Producer(i, i), "producer-" + i));
        }
        if (role.equals("consumer")) {
            int index = Integer.parseInt(conf.get("index"));
            threads.add(new Thread(new GroupConsumer(Integer.parseInt(conf.get("first_process")), index),
                    "consumer-" + index));
        }
        boolean group = conf.getOrDefault("workload", "queue").equals("group");
        for (int j = 0; j < consumers && (role.equals("all") || role.equals("consumers")); j++) {
            final int process = producers + j;
            threads.add(new Thread(group ? new GroupConsumer(process, j) : () -> consume(process), "consumer-" + j));
        }
        for (Thread t : threads) t.start();
        Thread stdin = new Thread(() -> {
            try {
                readStdin();
            } catch (IOException e) {
                STOP.set(true);
            }
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        for (Thread t : threads) t.join();
        emit("\"f\":\"exit\",\"next_process\":" + take(PROCESSES, 0));
    }
}
