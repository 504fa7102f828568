"""Linux-touching shell around the topology model: Mininet nodes, pyroute2 programming."""
