"""How a prefix-sharing batch is cut into runs whose held KV fits the arena (radix.shared_runs):
rows that share nothing stay one run; shared beginnings count once each, plus the kept last row."""

from quail_engine.infer.radix import shared_runs


def test_rows_that_share_nothing_stay_one_run():
    rows = [[i] * 40 for i in range(10)]
    assert shared_runs(rows, 100) == [list(range(10))]


def test_shared_beginnings_are_counted_once_and_cut_where_they_exceed_the_budget():
    a, b = [1] * 50, [9] * 50
    rows = [a + [2], a + [3], a + [4], b + [2], b + [3]]
    # a's 50 shared tokens once (not three times) + the last row (51): one run within 101
    assert shared_runs(rows[:3], 101) == [[0, 1, 2]]
    # both groups' beginnings (100) + a last row (51) exceed 120: b's second row starts a run
    assert shared_runs(rows, 120) == [[0, 1, 2, 3], [4]]
    assert shared_runs(rows, 151) == [[0, 1, 2, 3, 4]]


def test_a_row_longer_than_the_budget_is_a_run_of_its_own():
    assert shared_runs([[1] * 10, [1] * 9 + [2]], 5) == [[0], [1]]
