// A member of the group workload as the Java client runs it (FaultlineClient's "workload=group").
//
// The contract of faultline/workloads/group.py's GroupConsumer, and the ops it journals
// (docs/history.md): it subscribes to the topic in the run's group and commits, every
// "commit_interval_ms", one past the last record it polled of each partition since its last
// commit, with that record's leader epoch: "commit" sync waits for the answer (at most
// COMMIT_TIMEOUT), async does not and journals the outcome when the client reports it. The
// client runs its callbacks (rebalances, async commits' outcomes) on this thread inside
// poll(): a rebalance ends the open poll ok with no records, is journaled, and a new poll is
// invoked; a commit's outcome is journaled once the poll ends. A commit refused by an error
// of "refused" ends fail; any other error ends it info and retires the member, as a poll that
// throws does: a fresh member under a new process number takes over, and what the retired
// one's client reports after that (its closing callbacks) is not journaled. Once STOP is set
// it goes on polling for "settle_ms" (no time at all once told to leave: LEAVE). The
// "consumer.*" settings are its consumer's properties (group.id, group.protocol and, for the
// classic protocol, its session's timeouts); "instance_ids", if set, the group.instance.id of
// each consumer slot (static membership), kept by the slot's fresh members.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RetriableCommitFailedException;
import org.apache.kafka.common.TopicPartition;

final class GroupConsumer implements Runnable, ConsumerRebalanceListener {
    /** How long a sync commit waits: kafka-clients' default (default.api.timeout.ms, 60 s)
     *  outlasts the members' settling, so a commit unanswered in a fault would hold its
     *  member past the end of the run. An unanswered commit ends info. */
    static final Duration COMMIT_TIMEOUT = Duration.ofSeconds(10);

    /** An async commit's outcome as the client reported it: its offsets, its error name or null. */
    record Report(Map<TopicPartition, OffsetAndMetadata> offsets, String error) {}

    final String topic = FaultlineClient.conf.get("topic");
    final boolean async = FaultlineClient.conf.get("commit").equals("async");
    final long interval = Long.parseLong(FaultlineClient.conf.get("commit_interval_ms")) * 1_000_000L;
    final long settle = Long.parseLong(FaultlineClient.conf.get("settle_ms")) * 1_000_000L;
    final Set<String> refused = Set.of(FaultlineClient.conf.get("refused").split(","));
    final Map<String, String> properties = new HashMap<>();
    final int first;
    int process;
    KafkaConsumer<byte[], byte[]> consumer;
    boolean polling, retire;
    /** partition -> the offset to commit, with its record's leader epoch: polled since the last commit */
    TreeMap<Integer, OffsetAndMetadata> pending = new TreeMap<>();
    /** async commits' outcomes that came in during the open poll */
    List<Report> reports = new ArrayList<>();

    GroupConsumer(int first, int slot) {
        this.first = first;
        FaultlineClient.conf.forEach((k, v) -> {
            if (k.startsWith("consumer.")) properties.put(k.substring("consumer.".length()), v);
        });
        String ids = FaultlineClient.conf.get("instance_ids");
        if (ids != null) properties.put("group.instance.id", ids.split(",")[slot]);
    }

    @Override
    public void run() {
        open(first);
        long settled = 0;
        boolean stopping = false;
        long due = System.nanoTime() + interval;
        try {
            while (!stopping || System.nanoTime() - settled < 0) {
                if (!stopping && FaultlineClient.STOP.get()) {
                    stopping = true;
                    settled = System.nanoTime() + (FaultlineClient.LEAVE.get() ? 0 : settle);
                }
                if (retire) {
                    close();
                    open((int) FaultlineClient.take(FaultlineClient.PROCESSES, 1));
                }
                poll();
                if (!retire && System.nanoTime() - due >= 0) {
                    commit();
                    due = System.nanoTime() + interval;
                }
            }
        } finally {
            close();
        }
    }

    void open(int process) {
        // outcomes a throwing poll left unjournaled go with the member it retired
        this.process = process;
        retire = false;
        pending = new TreeMap<>();
        reports = new ArrayList<>();
        consumer = FaultlineClient.newConsumer(process, properties);
        consumer.subscribe(List.of(topic), this);
    }

    void close() {
        if (consumer == null) return;
        try {
            consumer.close(Duration.ofSeconds(5));  // its last callbacks are journaled: no poll is open
        } catch (RuntimeException e) {
            System.err.println("WARN GroupConsumer [Consumer clientId=faultline-c" + process + "] closing failed: " + e);
        }
        consumer = null;
    }

    void poll() {
        FaultlineClient.emit(FaultlineClient.op(process, "invoke", "poll", "null", null));
        polling = true;
        ConsumerRecords<byte[], byte[]> records;
        try {
            records = consumer.poll(Duration.ofMillis(100));
        } catch (RuntimeException e) {
            polling = false;
            FaultlineClient.emit(FaultlineClient.op(process, "info", "poll", "null", FaultlineClient.errorName(e)));
            retire = true;
            return;
        }
        polling = false;
        for (ConsumerRecord<byte[], byte[]> r : records) {
            pending.put(r.partition(), new OffsetAndMetadata(r.offset() + 1, r.leaderEpoch(), ""));
        }
        FaultlineClient.emit(FaultlineClient.op(process, "ok", "poll", FaultlineClient.records(records), null));
        journalReports();
    }

    /** Commit what was polled since the last commit. */
    void commit() {
        if (pending.isEmpty()) return;
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        pending.forEach((partition, at) -> offsets.put(new TopicPartition(topic, partition), at));
        pending = new TreeMap<>();
        if (async) {
            try {
                consumer.commitAsync(offsets, (answered, e) -> committed(offsets, e));
            } catch (RuntimeException e) {
                journalCommit(offsets, FaultlineClient.errorName(e));
            }
            return;
        }
        String value = offsetsValue(offsets);
        FaultlineClient.emit(FaultlineClient.op(process, "invoke", "commit", value, null));
        String error = null;
        try {
            consumer.commitSync(offsets, COMMIT_TIMEOUT);
        } catch (RuntimeException e) {
            error = FaultlineClient.errorName(e);
        }
        endCommit(value, error);
    }

    void endCommit(String value, String error) {
        if (error == null) {
            FaultlineClient.emit(FaultlineClient.op(process, "ok", "commit", value, null));
        } else if (refused.contains(error)) {
            FaultlineClient.emit(FaultlineClient.op(process, "fail", "commit", value, error));
        } else {
            FaultlineClient.emit(FaultlineClient.op(process, "info", "commit", value, error));
            retire = true;
        }
    }

    /** The client's report of an async commit: journaled as a commit op, after the poll it
     *  came in ends (it must not retire the process mid-poll). A retriable error comes
     *  wrapped: its cause names it. */
    void committed(Map<TopicPartition, OffsetAndMetadata> offsets, Exception e) {
        Throwable cause = e instanceof RetriableCommitFailedException && e.getCause() != null ? e.getCause() : e;
        reports.add(new Report(offsets, cause == null ? null : FaultlineClient.errorName(cause)));
        if (!polling) journalReports();
    }

    /** Journal the reports that came in; none once one retired the process (those after
     *  it, the retired member's, go unjournaled, as its closing callbacks). */
    void journalReports() {
        List<Report> came = reports;
        reports = new ArrayList<>();
        for (Report r : came) {
            if (retire) return;
            journalCommit(r.offsets(), r.error());
        }
    }

    void journalCommit(Map<TopicPartition, OffsetAndMetadata> offsets, String error) {
        String value = offsetsValue(offsets);
        FaultlineClient.emit(FaultlineClient.op(process, "invoke", "commit", value, null));
        endCommit(value, error);
    }

    /** A commit's offsets as the history holds them: [topic, partition, offset, leader_epoch]. */
    static String offsetsValue(Map<TopicPartition, OffsetAndMetadata> offsets) {
        StringBuilder b = new StringBuilder("{\"offsets\":[");
        String comma = "";
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            b.append(comma).append('[').append(FaultlineClient.str(e.getKey().topic())).append(',')
                    .append(e.getKey().partition()).append(',').append(e.getValue().offset()).append(',')
                    .append(e.getValue().leaderEpoch().map(String::valueOf).orElse("null")).append(']');
            comma = ",";
        }
        return b.append("]}").toString();
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        rebalanced("assign", partitions);
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        rebalanced("revoke", partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        rebalanced("lost", partitions);
    }

    /** Journal a rebalance (assign, revoke, lost) with the member id and the generation
     *  (classic) or member epoch (KIP-848) the client holds: the open poll, if any, ends
     *  before it and a new one is invoked after. */
    void rebalanced(String kind, Collection<TopicPartition> partitions) {
        if (retire) return;  // a retired member closing: its process ended with its info
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        StringBuilder b = new StringBuilder("{\"partitions\":[");
        String comma = "";
        for (TopicPartition tp : sorted) {
            if (!kind.equals("assign") && tp.topic().equals(topic)) pending.remove(tp.partition());
            b.append(comma).append('[').append(FaultlineClient.str(tp.topic())).append(',').append(tp.partition()).append(']');
            comma = ",";
        }
        var group = consumer.groupMetadata();
        String value = b.append("],\"member\":").append(FaultlineClient.str(group.memberId()))
                .append(",\"generation\":").append(group.generationId()).append('}').toString();
        if (polling) FaultlineClient.emit(FaultlineClient.op(process, "ok", "poll", "{\"records\":[]}", null));
        FaultlineClient.emit(FaultlineClient.op(process, "invoke", kind, value, null));
        FaultlineClient.emit(FaultlineClient.op(process, "ok", kind, value, null));
        if (polling) FaultlineClient.emit(FaultlineClient.op(process, "invoke", "poll", "null", null));
    }
}
