/* tests/raft/random.c: seeded random schedules (to be written). */
int main(void)
{
    return 0;
}
