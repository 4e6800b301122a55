"""Thread count per forward pass: one thread per core other processes leave free on our CPUs."""

from __future__ import annotations

from quail_engine.infer.threads import ThreadGovernor, busy_seconds

STAT = "cpu  {all}\ncpu0 {c0} 0 0 {i0} 0 0 0 0 0 0\ncpu1 {c1} 0 0 {i1} 0 0 0 0 0 0\nintr 1\n"


class FakeMachine:
    """Two CPUs; each step of `seconds`: other processes use `others` cores, we use `ours`."""

    def __init__(self):
        self.now, self.busy, self.ours = 0.0, [0.0, 0.0], 0.0
        self.set_to: list[int] = []

    def stat(self) -> str:
        ticks = [int(b * 100) for b in self.busy]
        idle = [int((self.now - b) * 100) for b in self.busy]
        return STAT.format(all=sum(ticks), c0=ticks[0], c1=ticks[1], i0=idle[0], i1=idle[1])

    def step(self, seconds: float, ours: float, others: float) -> None:
        self.now += seconds
        self.ours += ours * seconds
        used = (ours + others) * seconds
        self.busy = [b + used / 2 for b in self.busy]

    def governor(self, max_threads: int = 2) -> ThreadGovernor:
        g = ThreadGovernor(max_threads, cpus={0, 1}, read_stat=self.stat, clock=lambda: self.now,
                           cpu_time=lambda: self.ours, set_threads=self.set_to.append)
        g._tick = 100.0
        return g


def test_busy_seconds_reads_only_our_cpus():
    text = STAT.format(all=0, c0=150, c1=300, i0=50, i1=0)
    assert busy_seconds(text, {0, 1}, 100.0) == 4.5
    assert busy_seconds(text, {1}, 100.0) == 3.0


def test_a_busy_process_takes_a_thread_and_gives_it_back():
    machine = FakeMachine()
    gov = machine.governor()
    machine.step(1.0, ours=2.0, others=0.0)
    gov()
    assert gov.threads == 2 and machine.set_to == []
    machine.step(1.0, ours=1.2, others=0.8)   # another process took most of a core
    gov()
    assert gov.threads == 1 and machine.set_to == [1]
    machine.step(1.0, ours=1.0, others=1.0)
    gov()
    assert gov.threads == 1
    machine.step(1.0, ours=1.0, others=0.0)   # it stopped
    gov()
    assert gov.threads == 2 and machine.set_to == [1, 2]
    assert gov.passes == {2: 2, 1: 2}


def test_decisions_wait_for_a_measurable_interval():
    machine = FakeMachine()
    gov = machine.governor()
    machine.step(0.05, ours=0.0, others=2.0)  # a decode step: too short to measure
    gov()
    assert gov.threads == 2 and machine.set_to == []


def test_never_more_than_the_user_asked_for():
    machine = FakeMachine()
    gov = machine.governor(max_threads=1)
    machine.step(1.0, ours=1.0, others=0.0)
    gov()
    assert gov.threads == 1 and machine.set_to == []
