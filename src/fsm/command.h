/* fsm/command.h: the log schema (proto/once_log.proto) <-> struct fsm_cmd.
 *
 * Decoding is bounded and validating: every byte string is checked against
 * its limit from fsm.h, enums against their ranges, and anything wrong turns
 * the command into FSM_CMD_INVALID with a static reason; it never fails the
 * batch. Range checks that depend on replicated settings (ttl <= max_ttl, ...)
 * are the state machine's, not the decoder's.
 *
 * Encoding is used by the leader's pipeline, tests, fuzz seeds and the
 * benchmark. Buffers returned by the encoders are malloc'd and owned by the
 * caller. Not thread-safe per decoder; the functions without a decoder are. */
#ifndef ONCE_FSM_COMMAND_H_
#define ONCE_FSM_COMMAND_H_

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/pbwire.h"
#include "fsm/fsm.h"

/* A decoded batch envelope. Command byte strings are borrowed from the
 * decoded buffer (the hand-written reader) or the decoder's arena
 * (protobuf-c's), valid while that buffer is and until the next
 * command_decode_batch or command_decoder_close on that decoder. */
struct command_batch
{
    uint32_t schema_version;
    uint64_t leader_time_ms;
    size_t n_commands;
    const uint8_t **commands;
    const size_t *command_lens;
};

/* Holds the arenas protobuf-c unpacks into, so decoding never calls malloc
 * once the arenas have grown to their working size. */
struct command_decoder
{
    struct arena batch_arena;
    struct arena cmd_arena;
    const uint8_t **ptrs;
    size_t *lens;
    size_t cap;
};

void command_decoder_init(struct command_decoder *d);
void command_decoder_close(struct command_decoder *d);

/* Decode the envelope of @buf (borrowed). Returns 0, FSM_E_MALFORMED or
 * FSM_E_TOOBIG (over FSM_BATCH_MAX bytes or FSM_BATCH_COMMANDS_MAX commands).
 * Does not look at the schema version: the caller decides. */
int command_decode_batch(struct command_decoder *d,
                         const uint8_t *buf,
                         size_t len,
                         struct command_batch *out);

/* The hand-written half of command_decode_batch: reads @buf with
 * common/pbwire.h's reader, without protobuf-c's unpack and its allocation
 * per command (~250 instructions per command on every node; callgrind,
 * bench/cpu/run --batch 256). Returns 0 (@out filled, commands borrowed
 * from @buf), -ENOMEM, or 1: declined, for whatever protobuf-c might read
 * differently (an unknown field, a repeated schema_version or
 * leader_time_ms, another wire type, more than FSM_BATCH_COMMANDS_MAX
 * commands, malformed bytes); command_decode_batch then unpacks @buf with
 * protobuf-c as before. What it accepts, protobuf-c accepts with equal
 * fields (tests/fuzz/fuzz_codec.c). */
int command_read_batch(struct command_decoder *d,
                       const uint8_t *buf,
                       size_t len,
                       struct command_batch *out);

/* Decode one command into @out. Never fails: a bad command comes back as
 * FSM_CMD_INVALID with out->invalid_reason set. Pointers inside @out are
 * borrowed from @buf or the decoder's command arena and stay valid until
 * command_decoder_reset (so a whole batch can be decoded before it is
 * applied). */
void command_decode(struct command_decoder *d,
                    const uint8_t *buf,
                    size_t len,
                    struct fsm_cmd *out);

/* The reader table (common/pbwire.h) of the hand-written decoder that
 * command_decode tries first for a Command holding one Claim (the
 * Once__Log__Claim struct); what it declines goes to protobuf-c. Exposed
 * for tests/fuzz/fuzz_codec.c, which compares it with protobuf-c. */
extern const struct pbr_spec command_claim_pbr_spec;

/* Release what the decoded commands point into. */
void command_decoder_reset(struct command_decoder *d);

/* Encode one command (any type but FSM_CMD_INVALID). On success returns 0
 * and sets *out (malloc'd, owned by the caller) and *len. Returns -ENOMEM,
 * -EINVAL for FSM_CMD_INVALID, or FSM_E_TOOBIG when a field is over its size
 * limit. Only sizes are checked here: empty identities, unknown enum values
 * and the like are encoded as given, so tests can make every invalid command
 * the decoder and the state machine must refuse. */
int command_encode(const struct fsm_cmd *cmd, uint8_t **out, size_t *len);

/* Encode a Claim command into the caller's @buf of @cap bytes, the bytes
 * command_encode would malloc (the leader's pipeline keeps a typical claim
 * in its request, without a malloc and free per claim). Returns 0 and sets
 * *len; FSM_E_TOOBIG as command_encode; -ENOSPC when it is within its
 * limits but over @cap (then use command_encode). */
int command_encode_claim_into(const struct fsm_claim *c,
                              uint8_t *buf,
                              size_t cap,
                              size_t *len);

/* Encode a batch envelope around @n already-encoded commands (borrowed).
 * Returns 0 with *out malloc'd (owned by the caller), -ENOMEM or
 * FSM_E_TOOBIG. Protobuf cannot skip trailing padding, so the raft adapter
 * records the exact length in its own entry header before padding to 8. */
int command_encode_batch(uint32_t schema_version,
                         uint64_t leader_time_ms,
                         const uint8_t *const *cmds,
                         const size_t *cmd_lens,
                         size_t n,
                         uint8_t **out,
                         size_t *len);

/* The same, encoding into memory the caller provides: @get_buf(@arg, size)
 * returns a buffer of at least size bytes (or NULL: -ENOMEM), called once
 * when the size is known. Lets the raft pipeline encode straight into the
 * raft_malloc'd entry instead of copying the batch there. */
typedef uint8_t *(*command_buf_fn)(void *arg, size_t len);
int command_encode_batch_with(uint32_t schema_version,
                              uint64_t leader_time_ms,
                              const uint8_t *const *cmds,
                              const size_t *cmd_lens,
                              size_t n,
                              command_buf_fn get_buf,
                              void *arg,
                              size_t *len);

#endif /* ONCE_FSM_COMMAND_H_ */
