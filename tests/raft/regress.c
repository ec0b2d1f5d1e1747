/* tests/raft/regress.c: guard regressions (to be written). */
int main(void)
{
    return 0;
}
