"""AdminChild: requests answered in a child, a child's death an answer and not the
caller's, and no child outliving the process that started it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from faultline.cluster import kafka_client
from faultline.cluster.admin_child import CHILD_NAME, AdminChild, AdminDied

NOBODY = "127.0.0.1:1"  # nothing listens on port 1


def pid(admin: AdminClient) -> int:
    return os.getpid()


def abort(admin: AdminClient) -> None:
    os.abort()  # as librdkafka does on a failed assertion


def asleep(admin: AdminClient) -> None:
    time.sleep(600)  # a request that never ends


def not_found(admin: AdminClient, what: str) -> None:
    raise LookupError(f"no {what}")


def test_a_request_runs_in_the_child_and_its_errors_come_back_as_they_were() -> None:
    with AdminChild(NOBODY, timeout_s=1.0) as admin:
        child = admin.call(pid)
        assert child != os.getpid()
        assert admin.call(pid) == child  # one child serves every request
        with pytest.raises(LookupError, match="no topic"):
            admin.call(not_found, "topic")
        with pytest.raises(KafkaException) as raised:
            admin.call(kafka_client.registered_brokers, 1.0)
        assert not isinstance(raised.value, AdminDied)
        assert isinstance(raised.value.args[0], KafkaError)
        assert raised.value.args[0].code() == KafkaError._TIMED_OUT


def test_a_child_that_aborts_is_the_requests_answer_and_the_next_request_gets_a_new_child() -> None:
    with AdminChild(NOBODY, timeout_s=1.0) as admin:
        first = admin.call(pid)
        with pytest.raises(AdminDied, match="SIGABRT"):
            admin.call(abort)
        assert admin.call(pid) not in (first, os.getpid())


def test_the_child_exits_once_the_process_that_started_it_is_gone_even_mid_request() -> None:
    script = ("import os, threading, time\n"
              "from faultline.cluster.admin_child import AdminChild\n"
              "from tests.unit.cluster.test_admin_child import asleep, pid\n"
              "if __name__ == '__main__':\n"
              "    admin = AdminChild('127.0.0.1:1')\n"
              "    print(admin.call(pid), flush=True)\n"
              "    threading.Thread(target=admin.call, args=(asleep,), daemon=True).start()\n"
              "    time.sleep(0.5)\n"
              "    os._exit(0)  # no close, the child in a request: it must see its parent go\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         timeout=60, cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})
    child = int(out.stdout)
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), f"the admin child {child} outlived its parent"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def slow(admin: AdminClient) -> str:
    time.sleep(1)
    return "slow"


def unpicklable(admin: AdminClient) -> object:
    return lambda: None  # no answer pickle can carry


def test_an_answer_that_cannot_be_sent_is_an_error_of_the_harness_not_a_silent_broker() -> None:
    with AdminChild(NOBODY, timeout_s=1.0) as admin:
        first = admin.call(pid)
        with pytest.raises(RuntimeError, match="could not be sent"):
            admin.call(unpicklable)
        assert admin.call(pid) == first, "the child serves on"


def test_a_request_its_caller_gave_up_on_ends_its_child_and_no_later_request_reads_its_answer() -> None:
    with AdminChild(NOBODY, timeout_s=1.0) as admin:
        first = admin.call(pid)

        def interrupted(*_: object) -> None:
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, interrupted)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(KeyboardInterrupt):
                admin.call(slow)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        answer = admin.call(pid)
        assert isinstance(answer, int) and answer != first, f"{answer!r}: not a new child's own answer"


def test_a_request_after_close_starts_no_child_and_is_answered_destroyed() -> None:
    """Found by review: a scripted wait that outlived the heal's close started a new child
    that nobody would end (it lived as long as the run's process)."""
    admin = AdminChild(NOBODY, timeout_s=1.0)
    admin.call(pid)
    admin.close()
    with pytest.raises(KafkaException) as raised:
        admin.call(pid)
    assert raised.value.args[0].code() == KafkaError._DESTROY
    assert not [c for c in multiprocessing.active_children() if c.name == CHILD_NAME]
    admin.close()  # idempotent


def test_what_the_childs_client_logs_is_logged_here_under_its_own_name(
        caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka's lines from the child (here: its refused connections) reach this
    process's handlers, the run's faultline.log among them, as the child's records."""
    with (caplog.at_level("INFO", logger=kafka_client.CLIENT_LOG.name),
          AdminChild(NOBODY, timeout_s=1.0) as admin):
        child = admin.call(pid)
        with pytest.raises(KafkaException):
            admin.call(kafka_client.registered_brokers, 1.0)
    refused = [r for r in caplog.records if r.name == kafka_client.CLIENT_LOG.name and "Connection refused" in
               r.getMessage()]
    assert refused and all(r.process == child for r in refused), caplog.text
