import pytest

from ddbench.core.manifest import _cpuinfo, cpu_id

pytestmark = pytest.mark.unit

BLOCK = "processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: 2\n" \
        "model name\t: AMD EPYC\nstepping\t: 1\n\n"


def test_cpu_id_tells_two_chips_of_one_model_name_apart_from_the_first_processor(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(BLOCK.format(n=0, family=26) + BLOCK.format(n=1, family=25))
    b.write_text(BLOCK.format(n=0, family=25))
    assert cpu_id(_cpuinfo(a)) == "AuthenticAMD 26/2/1"
    assert cpu_id(_cpuinfo(b)) == "AuthenticAMD 25/2/1"


def test_cpu_id_is_none_where_the_kernel_does_not_say(tmp_path):
    (tmp_path / "arm").write_text("processor\t: 0\nBogoMIPS\t: 50.00\n\n")
    assert cpu_id(_cpuinfo(tmp_path / "arm")) is None
    assert cpu_id(_cpuinfo(tmp_path / "missing")) is None
