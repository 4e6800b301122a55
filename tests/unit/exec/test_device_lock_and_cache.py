"""The device lock across processes and an answer cache that cannot be used: a killed holder
never blocks the device, a waiting process names the holder once, and a damaged cache file
costs a warning, not the query."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.device_lock import DeviceLock

HOLD = ("import sys, time; from quail_engine.exec.device_lock import DeviceLock; "
        "DeviceLock('cpu', sys.argv[1]).acquire(); print('held', flush=True); time.sleep(600)")


def _holder(path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "held\n"
    return proc


def _acquire_in_thread(lock: DeviceLock) -> threading.Thread:
    def take():
        with lock:
            pass
    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_a_waiting_process_names_the_holder_once_and_a_killed_holder_frees_the_device(
        tmp_path, caplog):
    path = tmp_path / "cpu.lock"
    holder = _holder(path)
    lock = DeviceLock("cpu", path)
    with caplog.at_level(logging.INFO, logger="quail_engine.stage"):
        waiter = _acquire_in_thread(lock)
        # the waiter says it waits just before it blocks on the file lock: the kill comes after
        # that, not after a guess at how long the thread takes to get there
        deadline = time.monotonic() + 60
        while not any(r.name == "quail_engine.stage" for r in caplog.records):
            assert waiter.is_alive() and time.monotonic() < deadline, "the waiter never waited"
            time.sleep(0.01)
        assert waiter.is_alive()  # the device is taken
        holder.kill()  # SIGKILL: no chance to release anything
        holder.wait()
        waiter.join(60)
        assert not waiter.is_alive()
        with lock, lock:  # reentrant, and free again
            pass
    said = [r.getMessage() for r in caplog.records if r.name == "quail_engine.stage"]
    assert said == [f"waiting for another quail process using cpu (pid {holder.pid})"]


def test_the_lock_is_reentrant_within_a_thread_and_exclusive_between_threads(tmp_path):
    lock = DeviceLock("cpu", tmp_path / "cpu.lock")
    with lock:
        with lock:
            other = _acquire_in_thread(lock)
            other.join(0.5)
            assert other.is_alive()
        other.join(0.5)
        assert other.is_alive()  # still held by the outer block
    other.join(60)
    assert not other.is_alive()


def test_an_answer_cache_that_is_not_a_database_is_a_warning(tmp_path, caplog):
    path = tmp_path / "answers.sqlite"
    path.write_bytes(b"this is not an SQLite database" * 100)
    cache = AnswerCache(path)
    assert cache.get_many(["k"]) == {}
    cache.put_many({"k": True})
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "answers of this run are not cached" in caplog.text


def test_answers_survive_a_writer_killed_between_batches(tmp_path):
    path = tmp_path / "answers.sqlite"
    code = ("import sys, os; from quail_engine.exec.answer_cache import AnswerCache; "
            "c = AnswerCache(sys.argv[1]); c.put_many({'a': 1}); "
            "c._con.execute('BEGIN IMMEDIATE'); "
            "c._con.execute(\"INSERT INTO answers VALUES ('b', '2')\"); "
            "os.kill(os.getpid(), 9)")
    proc = subprocess.run([sys.executable, "-c", code, str(path)])
    assert proc.returncode == -9
    assert os.path.exists(str(path) + "-wal")
    assert AnswerCache(path).get_many(["a", "b"]) == {"a": 1}  # committed kept, open rolled back


def test_threads_opening_a_new_answer_cache_at_once_all_cache(tmp_path, caplog):
    """dbt runs models in threads: several open the same new answer cache at the same moment.
    None may give up on it ('database is locked' while another switches the file to WAL)."""
    import threading

    from quail_engine.exec.answer_cache import AnswerCache

    for round_ in range(12):
        path = tmp_path / f"r{round_}" / "answers.sqlite"
        start = threading.Barrier(8)
        caches = []

        def open_and_write(i, start=start, path=path, caches=caches):
            start.wait()
            cache = AnswerCache(path)
            cache.put_many({f"k{i}": i})
            caches.append(cache)

        threads = [threading.Thread(target=open_and_write, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not [r for r in caplog.records if "answer cache" in r.getMessage()]
        assert AnswerCache(path).get_many(f"k{i}" for i in range(8)) == {
            f"k{i}": i for i in range(8)}
        for c in caches:
            c.close()


def test_keys_lead_with_the_document_and_old_files_still_answer(tmp_path):
    """A key starts with its document's digest (a batch's answers share index pages); a file
    written before that keeps answering under its bare keys, a new file never looks there."""
    import sqlite3

    from quail_engine.exec.answer_cache import DOC_BYTES, answer_key, text_digest

    doc = text_digest("a review")
    key = answer_key("model", "yes/no", doc, "Question: positive?")
    assert key.startswith(doc[:DOC_BYTES].hex()) and len(key) == 2 * DOC_BYTES + 64
    assert answer_key("model", "yes/no", doc, "Question: negative?")[:16] == key[:16]
    old = tmp_path / "old" / "answers.sqlite"
    old.parent.mkdir()
    con = sqlite3.connect(str(old))
    con.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("INSERT INTO answers VALUES (?, 'true')", (key[2 * DOC_BYTES:],))
    con.commit()
    con.close()
    cache = AnswerCache(old)
    other = answer_key("model", "yes/no", doc, "Question: other?")
    cache.put_many({other: False})
    assert cache.get_many([key, other, "k"]) == {key: True, other: False}
    cache.close()
    assert AnswerCache(old).get_many([key]) == {key: True}  # still, once the file has meta
    new = AnswerCache(tmp_path / "new" / "answers.sqlite")
    new.put_many({key[2 * DOC_BYTES:]: True})  # a bare key in a new file is just a key
    assert new.get_many([key]) == {} and not new._legacy


def test_many_keys_of_one_document_are_read_as_its_key_range(tmp_path):
    """From RANGE_MIN keys of one document, get_many reads that document's range of the index
    once (a join chunk's pairs) instead of one probe per key: the same answers, only those
    asked (another question's answer on the same document, another document's, stay out)."""
    from quail_engine.exec.answer_cache import RANGE_MIN, AnswerKeys, answer_key, text_digest

    cache = AnswerCache(tmp_path / "answers.sqlite")
    keys = AnswerKeys("model", "yes/no")
    doc, other_doc = text_digest("an anchor"), text_digest("another anchor")
    asked = [keys.key(doc, f"Question: partner {i}?") for i in range(RANGE_MIN + 6)]
    assert asked[3] == answer_key("model", "yes/no", doc, "Question: partner 3?")
    stored = {k: i % 2 == 0 for i, k in enumerate(asked) if i % 3}  # a third never computed
    not_asked = {keys.key(doc, "Question: not asked?"): True,
                 keys.key(other_doc, "Question: partner 1?"): False}
    cache.put_many({**stored, **not_asked})
    few = keys.key(other_doc, "Question: partner 2?")
    cache.put_many({few: True})
    assert cache.get_many(asked + [few]) == {**stored, few: True}
    # keys of any text: the range ends above every character, not at the hex digits' end
    odd = {f"{'x' * 16}{c}{i}": i for i in range(RANGE_MIN) for c in "az\u00e9"}
    cache.put_many(odd)
    assert cache.get_many(odd) == odd
    cache.close()
