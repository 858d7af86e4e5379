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
// abort_probability, transaction_timeout_ms, seed, gap_ms (the pause between one send of a
// transaction and its next); "rate" is this producer's sends per
// second (0: as fast as it goes). The Java client speaks transaction protocol version 2
// (KIP-890) where the cluster's finalized transaction.version is 2, else version 1.
//
// With the setting reads above 0 each is a read-process-write processor, as
// faultline/workloads/rpw.py's for librdkafka (docs/history.md, "txn"): a Processor, a
// consumer subscribed in the group rpw_group (read_committed, no auto commit), polls up to
// reads records after beginTransaction; after the sends, sendOffsetsToTransaction sends the
// positions one past the last record read of each partition with the consumer's group
// metadata; the completion adds "reads" and "group_offsets". An aborted transaction's
// consumer seeks back to the first record it read of each partition; a retired producer's
// is replaced too. A poll that throws, or a sendOffsetsToTransaction that times out, ends
// the transaction "info" (as txn.py ends a consumer's error, or a send_offsets_to_transaction
// still retriable at its deadline).

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
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
    /** How long one poll of a processor's consumer may wait for records (clients.py's
     *  POLL_TIMEOUT_S). */
    static final Duration POLL_TIMEOUT = Duration.ofMillis(100);

    final int index;
    final int first;
    final String topic = FaultlineClient.conf.get("topic");
    final int partitions = Integer.parseInt(FaultlineClient.conf.get("partitions"));
    final int sends = Integer.parseInt(FaultlineClient.conf.get("sends"));
    final double abortProbability = Double.parseDouble(FaultlineClient.conf.get("abort_probability"));
    final double rate = Double.parseDouble(FaultlineClient.conf.get("rate"));
    final int maxReads = Integer.parseInt(FaultlineClient.conf.get("reads"));
    final long gapNanos = Long.parseLong(FaultlineClient.conf.get("gap_ms")) * 1_000_000L;
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
        /** What its processor read; null: no processor, or not yet. */
        List<Read> reads;
        /** The positions it sent, by partition. */
        Map<Integer, Long> groupOffsets = Map.of();

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
            if (reads != null) {
                b.append(",\"reads\":[");
                for (int i = 0; i < reads.size(); i++) {
                    Read r = reads.get(i);
                    if (i > 0) b.append(',');
                    b.append('[').append(r.partition()).append(',').append(r.offset()).append(',')
                            .append(r.value()).append(']');
                }
                b.append("],\"group_offsets\":[");
                String comma = "";
                for (var o : groupOffsets.entrySet()) {
                    b.append(comma).append('[').append(o.getKey()).append(',').append(o.getValue()).append(']');
                    comma = ",";
                }
                b.append(']');
            }
            return b.append('}').toString();
        }
    }

    /** A record read: its partition, offset and value as JSON (FaultlineClient.decode). */
    record Read(int partition, long offset, String value) {}

    /** The consuming half of a read-process-write processor (rpw.py's Processor); with
     *  maxReads 0 it has no consumer and does nothing. The producer's thread alone calls it. */
    final class Processor {
        KafkaConsumer<byte[], byte[]> consumer;
        int process;

        /** Subscribe a fresh consumer for process, after closing (so leaving the group
         *  with) the one before. */
        void open(int process) {
            close();
            this.process = process;
            if (maxReads == 0) return;
            consumer = FaultlineClient.newConsumer(process, Map.of(
                    "client.id", "faultline-p" + process + "-rpw",
                    "group.id", FaultlineClient.conf.get("rpw_group"),
                    "isolation.level", "read_committed",
                    "max.poll.records", Integer.toString(maxReads)));
            consumer.subscribe(List.of(topic));
        }

        /** Up to maxReads records (null without a consumer); throws what poll throws. */
        List<Read> read() {
            if (consumer == null) return null;
            List<Read> out = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL_TIMEOUT)) {
                out.add(new Read(r.partition(), r.offset(), FaultlineClient.decode(r.value())));
            }
            return out;
        }

        /** Send the positions one past the last of read of each partition to producer's
         *  open transaction with the group's metadata: the positions, by partition (none
         *  without reads); throws what sendOffsetsToTransaction throws. */
        Map<Integer, Long> sendOffsets(KafkaProducer<byte[], byte[]> producer, List<Read> read) {
            if (read.isEmpty()) return Map.of();
            Map<Integer, Long> positions = new TreeMap<>();
            for (Read r : read) positions.merge(r.partition(), r.offset() + 1, Math::max);
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            positions.forEach((p, o) -> offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(o)));
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            return positions;
        }

        /** After an abort: seek each partition of read back to the first record read
         *  there, where the consumer still holds it (a new owner starts at the group's
         *  committed offset anyway). */
        void rewind(List<Read> read) {
            if (consumer == null || read == null) return;
            Map<Integer, Long> first = new TreeMap<>();
            for (Read r : read) first.merge(r.partition(), r.offset(), Math::min);
            first.forEach((p, o) -> {
                try {
                    consumer.seek(new TopicPartition(topic, p), o);
                } catch (RuntimeException e) {
                    warn(process, "read-process-write consumer: rewinding partition " + p + ": " + e);
                }
            });
        }

        /** Close the consumer, leaving the group; idempotent. */
        void close() {
            if (consumer == null) return;
            try {
                consumer.close(Duration.ofSeconds(5));
            } catch (RuntimeException e) {
                warn(process, "read-process-write consumer: close: " + e);
            }
            consumer = null;
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
        Processor processor = new Processor();
        processor.open(process);
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
            String[] ended = transact(producer, txn, processor);
            FaultlineClient.emit(FaultlineClient.op(process, ended[0], "txn", txn.json(), ended[1]));
            if (ended[0].equals("info")) {
                producer.close(Duration.ZERO);
                process = (int) FaultlineClient.take(FaultlineClient.PROCESSES, 1);
                producer = start(process);
                processor.open(process);
            }
        }
        processor.close();
        if (producer != null) producer.close(Duration.ofMillis(Long.parseLong(END_TIMEOUT_MS)));
    }

    /** Begin, read (processor), send, send the offsets read, and commit (or abort) txn:
     *  {type, error}: "ok" with commitTransaction returned, "fail" with abortTransaction
     *  returned (the error: why a transaction meant to commit was aborted; what it read is
     *  read again), else "info" and the error. */
    String[] transact(KafkaProducer<byte[], byte[]> producer, Txn txn, Processor processor) {
        String refused = null;
        try {
            producer.beginTransaction();
            try {
                txn.reads = processor.read();
            } catch (RuntimeException e) {
                return new String[] {"info", name(e)};
            }
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < sends; i++) {
                if (i > 0 && gapNanos > 0) FaultlineClient.sleepNanos(gapNanos);
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
            if (refused == null && txn.reads != null) {
                try {
                    txn.groupOffsets = processor.sendOffsets(producer, txn.reads);
                } catch (TimeoutException e) {
                    return new String[] {"info", name(e)};  // the offsets may yet be added
                }
            }
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
        processor.rewind(txn.reads);
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
