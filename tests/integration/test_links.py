"""LinkWatch (mrcemu.nic.links) in a namespace of its own: a veth whose peer goes down
is reported by the kernel's notification, with no polling, and comes back the same way."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from pyroute2 import netns as pn

from mrcemu.nic.links import LinkWatch
from tests.integration.conftest import wait_for

NS, IFA, IFB = "mrct-links", "mrctl0", "mrctl1"


def sh(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


@pytest.fixture
def watch() -> Iterator[LinkWatch]:
    subprocess.run(f"ip netns del {NS}", shell=True, capture_output=True)
    sh(f"ip netns add {NS} && ip -n {NS} link add {IFA} type veth peer name {IFB} && "
       f"ip -n {NS} link set {IFA} up && ip -n {NS} link set {IFB} up")
    w = None
    try:
        pn.pushns(f"/run/netns/{NS}")
        try:
            w = LinkWatch()  # its sockets belong to the namespace they were made in
        finally:
            pn.popns()
        wait_for(lambda: w.up({IFA, IFB}) == {IFA, IFB})
        w.changed()  # the bring-up's own notifications
        yield w
    finally:
        if w is not None:
            w.close()
        subprocess.run(f"ip netns del {NS}", shell=True, capture_output=True)


def notified(w: LinkWatch) -> bool:
    seen: list[bool] = []
    wait_for(lambda: seen.append(w.changed()) or any(seen))
    return any(seen)


def test_quiet_links_say_nothing(watch):
    assert watch.changed() is False
    assert watch.up({IFA, IFB}) == {IFA, IFB}


def test_a_peer_going_down_and_up_is_notified_and_queried(watch):
    sh(f"ip -n {NS} link set {IFB} down")
    assert notified(watch)
    # IFB is administratively down; IFA lost its carrier with it.
    wait_for(lambda: watch.up({IFA, IFB}) == set())
    assert watch.up({IFA, IFB}) == set()
    sh(f"ip -n {NS} link set {IFB} up")
    assert notified(watch)
    wait_for(lambda: watch.up({IFA, IFB}) == {IFA, IFB})
    assert watch.up({IFA, IFB}) == {IFA, IFB}


def test_only_the_named_links_are_reported(watch):
    assert watch.up({IFA}) == {IFA}
    assert watch.up({"no-such-link"}) == set()
