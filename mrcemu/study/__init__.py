"""`mrcemu study`: seeded sets of runs on fabrics of several sizes, and what they show
about ECMP's hashing against MRC's spraying. The hash census (census.py, census_run.py)
counts where the kernel's multipath hash puts RoCE's QPs."""
