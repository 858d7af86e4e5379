// The txn workload's transactional producer as the Java client runs it (the setting
// workload=txn makes FaultlineClient's producers these; faultline/workloads/java_txn.py
// drives it).
//
// Each journals every transaction as one "txn" op, as faultline/workloads/txn.py does for
// librdkafka (docs/history.md, "txn"): the invoke lists its sends (values unique within the
// run, spread over the partitions) and "abort" (drawn with abort_probability); the
// completion adds each send's offset where its future gave one and "committing" (the
// System.nanoTime() when it asked to commit), and is "ok" when commitTransaction returned,
// "fail" when abortTransaction did, "info" when neither is known. A producer whose
// transaction ended "info" is retired: a fresh instance with the same transactional.id
// (transactional_ids[index]) and a new process number takes over, and its
// initTransactions fences the old one and ends the transaction it left open. Settings
// beside the queue's: transactional_ids (comma-separated, by producer), sends,
// abort_probability, transaction_timeout_ms, seed; "rate" is this producer's sends per
// second (0: as fast as it goes). The Java client speaks transaction protocol version 2
// (KIP-890) where the cluster's finalized transaction.version is 2, else version 1.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

final class TxnProducer implements Runnable {
    /** How long one call that ends a transaction (or starts the producer) may block before
     *  the producer gives up on it (max.block.ms; txn.py's END_TIMEOUT_S): the client
     *  retries retriable errors until then. */
    static final String END_TIMEOUT_MS = "30000";
    /** Between attempts of initTransactions. */
    static final long RETRY_BACKOFF_NS = 500_000_000L;

    final int index;
    final int first;
    final String topic = FaultlineClient.conf.get("topic");
    final int partitions = Integer.parseInt(FaultlineClient.conf.get("partitions"));
    final int sends = Integer.parseInt(FaultlineClient.conf.get("sends"));
    final double abortProbability = Double.parseDouble(FaultlineClient.conf.get("abort_probability"));
    final double rate = Double.parseDouble(FaultlineClient.conf.get("rate"));
    final SplittableRandom rng;

    TxnProducer(int index, int first) {
        this.index = index;
        this.first = first;
        this.rng = new SplittableRandom(Long.parseLong(FaultlineClient.conf.get("seed")) + index * 0x9E3779B97F4A7C15L);
    }

    /** One transaction: its sends' partitions and values, and what their futures said. */
    final class Txn {
        final boolean abort;
        final int[] partition = new int[sends];
        final long[] value = new long[sends];
        final Long[] offset = new Long[sends];
        /** When the producer asked to commit it; null: it has not. */
        Long committing;

        Txn(boolean abort, int firstPartition, long firstValue) {
            this.abort = abort;
            for (int i = 0; i < sends; i++) {
                partition[i] = (firstPartition + i) % partitions;
                value[i] = firstValue + i;
            }
        }

        /** The op's value, as txn.py's _Transaction.value. */
        String json() {
            StringBuilder b = new StringBuilder("{\"topic\":").append(FaultlineClient.str(topic))
                    .append(",\"abort\":").append(abort).append(",\"sends\":[");
            for (int i = 0; i < sends; i++) {
                if (i > 0) b.append(',');
                b.append("{\"partition\":").append(partition[i]).append(",\"value\":").append(value[i]);
                if (offset[i] != null) b.append(",\"offset\":").append(offset[i]);
                b.append('}');
            }
            b.append(']');
            if (committing != null) b.append(",\"committing\":").append(committing);
            return b.append('}').toString();
        }
    }

    KafkaProducer<byte[], byte[]> open(int process) {
        var conf = FaultlineClient.conf;
        Properties p = FaultlineClient.common("faultline-p" + process);
        p.put("acks", conf.get("acks"));
        p.put("enable.idempotence", "true");
        p.put("retries", conf.get("retries"));
        p.put("max.in.flight.requests.per.connection", conf.get("max_in_flight"));
        p.put("delivery.timeout.ms", conf.get("delivery_timeout_ms"));
        p.put("request.timeout.ms", conf.get("request_timeout_ms"));
        p.put("linger.ms", conf.get("linger_ms"));
        p.put("max.block.ms", END_TIMEOUT_MS);
        p.put("transactional.id", conf.get("transactional_ids").split(",")[index]);
        p.put("transaction.timeout.ms", conf.get("transaction_timeout_ms"));
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** A producer for process, its transactions initialized (which fences every earlier
     *  instance of its transactional.id); null if the clients stopped first. */
    KafkaProducer<byte[], byte[]> start(int process) {
        KafkaProducer<byte[], byte[]> producer = open(process);
        while (!FaultlineClient.STOP.get()) {
            try {
                producer.initTransactions();
                return producer;
            } catch (TimeoutException e) {
                warn(process, "initTransactions timed out; again");
            } catch (RuntimeException e) {
                warn(process, "initTransactions: " + e + "; a fresh instance");
                producer.close(Duration.ZERO);
                producer = open(process);
            }
            FaultlineClient.sleepNanos(RETRY_BACKOFF_NS);
        }
        producer.close(Duration.ZERO);
        return null;
    }

    /** A warning into the client log (FaultlineClient's log line format, naming the client). */
    static void warn(int process, String message) {
        System.err.println("WARN TxnProducer [Producer clientId=faultline-p" + process + "] " + message);
    }

    @Override
    public void run() {
        int process = first;
        KafkaProducer<byte[], byte[]> producer = start(process);
        int next = index % partitions;
        long interval = rate > 0 ? (long) (sends * 1e9 / rate) : 0;
        long due = System.nanoTime();
        while (producer != null && !FaultlineClient.STOP.get()) {
            long wait = due - System.nanoTime();
            if (interval > 0 && wait > 0) {
                FaultlineClient.sleepNanos(Math.min(wait, 50_000_000L));
                continue;
            }
            due += interval;
            Txn txn = new Txn(rng.nextDouble() < abortProbability, next,
                    FaultlineClient.take(FaultlineClient.VALUES, sends));
            next = (next + sends) % partitions;
            FaultlineClient.emit(FaultlineClient.op(process, "invoke", "txn", txn.json(), null));
            if (FaultlineClient.journaled != null) FaultlineClient.journaled.acquireUninterruptibly();
            String[] ended = transact(producer, txn);
            FaultlineClient.emit(FaultlineClient.op(process, ended[0], "txn", txn.json(), ended[1]));
            if (ended[0].equals("info")) {
                producer.close(Duration.ZERO);
                process = (int) FaultlineClient.take(FaultlineClient.PROCESSES, 1);
                producer = start(process);
            }
        }
        if (producer != null) producer.close(Duration.ofMillis(Long.parseLong(END_TIMEOUT_MS)));
    }

    /** Begin, send and commit (or abort) txn: {type, error}: "ok" with commitTransaction
     *  returned, "fail" with abortTransaction returned (the error: why a transaction meant
     *  to commit was aborted), else "info" and the error. */
    String[] transact(KafkaProducer<byte[], byte[]> producer, Txn txn) {
        String refused = null;
        try {
            producer.beginTransaction();
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < sends; i++) {
                try {
                    futures.add(producer.send(new ProducerRecord<>(topic, txn.partition[i], null,
                            Long.toString(txn.value[i]).getBytes(StandardCharsets.US_ASCII))));
                } catch (RuntimeException e) {
                    futures.add(null);
                    if (refused == null) refused = name(e);
                }
            }
            // the records reach the log, a transaction meant to abort's too (abortTransaction
            // fails the batches not yet sent, so its records would never be written to be
            // skipped), and every future completes
            if (refused == null) producer.flush();
            offsets(txn, futures);
            if (!txn.abort && refused == null) {
                txn.committing = System.nanoTime();
                try {
                    producer.commitTransaction();
                } catch (TimeoutException e) {
                    return new String[] {"info", name(e)};  // the commit may be completing
                }
                return new String[] {"ok", null};
            }
        } catch (RuntimeException e) {
            if (refused == null) refused = name(e);
        }
        try {
            producer.abortTransaction();
        } catch (RuntimeException e) {
            return new String[] {"info", name(e)};
        }
        return new String[] {"fail", refused};
    }

    /** Each completed send's offset into txn, from its future (null: send() threw). */
    static void offsets(Txn txn, List<Future<RecordMetadata>> futures) {
        for (int i = 0; i < futures.size(); i++) {
            Future<RecordMetadata> f = futures.get(i);
            if (f == null || !f.isDone()) continue;
            try {
                RecordMetadata meta = f.get();
                if (meta.hasOffset()) txn.offset[i] = meta.offset();
            } catch (ExecutionException | InterruptedException e) {
                // no offset: the send failed, and the transaction cannot commit
            }
        }
    }

    /** The Kafka error name of e, or of the API error it wraps (a transactional method
     *  throws KafkaException around the error that put the producer in its error state). */
    static String name(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof ApiException) return FaultlineClient.errorName(c);
        }
        return FaultlineClient.errorName(e);
    }
}
