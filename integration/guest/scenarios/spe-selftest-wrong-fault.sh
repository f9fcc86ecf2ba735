# The suite's negative control: each fault case arms a fault whose
# reaction differs from the case's (SPE_TEST_WRONG_FAULT), so every fault
# case the backend delivers must fail.
export SPE_TEST_WRONG_FAULT=1
. /scenarios/spe-selftest.sh
