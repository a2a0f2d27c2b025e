#!/bin/sh
# A scheduler script on the simulated cluster (mounted at /scripts in the
# compose simulator). The compute simulator runs echo, cp, exit and its
# #SIM directives (see internal/apisim).
echo smoke test on $(hostname)
#SIM output result.dat 64K
