/* tests/integration/raftnode.c: minimal node driver (to be written). */
int main(void)
{
    return 0;
}
