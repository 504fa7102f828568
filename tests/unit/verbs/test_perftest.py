"""Reading perftest's result tables (verbs/perftest.py), as its print formats lay them
out, and their conversion to the fabric's full-speed units."""

from __future__ import annotations

import pytest

from mrcemu.verbs import perftest

BW_GBITS = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Device          : mrcemu0
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      200              0.15               0.12		     0.000229
---------------------------------------------------------------------------------------
"""
BW_MIB = BW_GBITS.replace("Gb/sec", "MiB/sec").replace("0.15 ", "17.50").replace(
    "0.12\t", "14.31\t")
LAT = """\
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       50          25901.10        26210.00      25950.30  	       25960.01     	\
50.20		26100.00 		26210.00
"""


def test_bandwidth_in_gbits_and_in_mib():
    b = perftest.bandwidth(BW_GBITS)
    assert (b.size, b.iterations) == (65536, 200)
    assert b.average_mbps == pytest.approx(120.0)
    assert b.full_speed_mbps(4) == pytest.approx(480.0)
    m = perftest.bandwidth(BW_MIB)
    assert m.average_mbps == pytest.approx(14.31 * 1048576 * 8 / 1e6)


def test_latency_one_way_and_at_full_speed():
    lat = perftest.latency(LAT)
    assert (lat.size, lat.iterations) == (2, 50)
    assert lat.typical_us == pytest.approx(25950.30)
    assert lat.p99_us == pytest.approx(26100.0)
    assert lat.full_speed_us(2) == pytest.approx(12975.15)


@pytest.mark.parametrize("text", ["", "Couldn't connect to h7:18515\n",
                                  BW_GBITS.replace("Gb/sec", "furlongs")])
def test_an_output_without_a_result_says_so(text):
    with pytest.raises(perftest.NotAResult):
        perftest.bandwidth(text)
