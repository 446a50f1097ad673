"""Page 1's wording: a ratio's verdict is what its interval says, and a step's cost reads forwards."""

from report import front, tables


def test_a_ratio_cell_says_no_more_than_its_interval():
    assert str(front.ratio_cell(1.05, 0.98, 1.12, "within noise")) == "1.05 (0.98--1.12) within noise"
    assert "faster" not in str(front.ratio_cell(1.05, 0.98, 1.12, "within noise"))
    assert str(front.ratio_cell(0.69, 0.58, 0.82, "slower")) == r"0.69 (0.58--0.82) \textbf{slower}"
    assert str(front.ratio_cell(float("nan"), float("nan"), float("nan"), "not compared")) == "--"


def test_step_cost_reads_as_the_arms_step_over_the_references():
    # the analysis' step-time ratio is the reference's step over the arm's: 0.5 means the arm's step costs twice
    row = {"step_time_ratio": 0.5, "step_time_ratio_lo": 0.4, "step_time_ratio_hi": 0.625}
    assert front.step_cost(row) == "its step costs 100\\% more, 95\\% CI 60 to 150\\%"
    assert str(tables.step_cost(row)) == "+100\\% [+60 to +150]"
    cheaper = {"step_time_ratio": 1.25, "step_time_ratio_lo": 1.0, "step_time_ratio_hi": 1.6}
    assert front.step_cost(cheaper).startswith("its step costs 20\\% less")
    assert str(tables.step_cost(cheaper)) == "$-$20\\% [$-$38 to +0]"
