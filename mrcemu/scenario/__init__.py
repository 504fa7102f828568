"""Scenarios: a workload and a fault timeline run over each transport on one fabric."""

from mrcemu.scenario.model import Scenario, load

__all__ = ["Scenario", "load"]
