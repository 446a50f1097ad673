"""The setup table's CPU line: name, the family/model id where the manifest has it, cores."""

from analysis.read.manifest import Host
from report.build import cpu_line


def test_the_cpu_line_names_the_chip_id_where_recorded():
    assert cpu_line(Host(cpu="AMD EPYC", cpu_id="AuthenticAMD 26/2/1", cores=2)) == \
        "AMD EPYC (AuthenticAMD 26/2/1), 2 cores"
    assert cpu_line(Host(cpu="Intel(R) Xeon(R) Processor", cores=2)) == "Intel(R) Xeon(R) Processor, 2 cores"
    assert cpu_line(Host()) == "not recorded, not recorded cores"
