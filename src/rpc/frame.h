/* rpc/frame.h: RPC frames and envelopes (docs/design.md §5), pure.
 *
 * A frame is a 4-byte big-endian length followed by that many bytes: one
 * encoded once.rpc.Envelope (proto/once_rpc.proto). The envelope carries the
 * call id, method, direction, deadline, status with `applied` and the leader
 * hint, the answering node's identity (cluster id, node id, boot id), the
 * group id, and the body: the encoded <Method>Request or <Method>Response.
 *
 * No I/O, no clock. The header path (frame_decode_header,
 * frame_encode_header) allocates nothing; envelope_decode unpacks through the
 * view's own arena with a budget proportional to the frame length, so a
 * hostile frame can neither crash the decoder nor make it allocate more than
 * a small multiple of what was read. Every field is validated; a malformed
 * frame gives a negative RPC_E_* code and a message, never an abort.
 *
 * Not thread-safe: a view is used by one thread (its connection's loop).
 * Functions without a view are reentrant. */
#ifndef ONCE_RPC_FRAME_H_
#define ONCE_RPC_FRAME_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "common/arena.h"
#include "common/err.h"
#include "common/pbwire.h"
#include "once_rpc.pb-c.h"

#define FRAME_HEADER_LEN 4
/* Default largest envelope (docs/design.md §5); callers pass their own limit.
 */
#define FRAME_MAX_DEFAULT (1u << 20)
/* No limit above this is accepted (keeps lengths in 32 bits with room). */
#define FRAME_MAX_CEIL (64u << 20)

#define RPC_ID_LEN       16 /* cluster id, boot id */
#define RPC_ERROR_MAX    1024
#define RPC_ADDR_MAX     64
#define RPC_DEADLINE_MAX (3600u * 1000) /* ms */
/* Bytes the decoder may allocate for a frame of @len bytes: protobuf-c
 * copies every bytes/string field and keeps unknown fields (a newer peer),
 * about len + 16 per field; the slack covers the message struct and a few
 * hundred fields. Envelopes with thousands of tiny (unknown) fields are
 * refused with RPC_E_BUDGET rather than decoded at 20x their size. */
#define ENVELOPE_BUDGET(len) (2 * (size_t)(len) + 16384)

/* Errors (0 is success). Reserved range -1500..-1599. */
enum { ERR_RPC_CODES(ERR_ENUM) }; /* common/err.h; conn.h's too */

/* Numbers equal the wire enums of proto/once_rpc.proto (checked by static
 * assertions in frame.c). */
enum rpc_method {
    RPC_METHOD_UNSPECIFIED = 0,
    RPC_METHOD_CLAIM = 1,
    RPC_METHOD_COMPLETE,
    RPC_METHOD_RELEASE,
    RPC_METHOD_LOOKUP,
    RPC_METHOD_FORGET,
    RPC_METHOD_STATUS,
    RPC_METHOD_MEMBERS_LIST,
    RPC_METHOD_MEMBERS_ADD,
    RPC_METHOD_MEMBERS_REMOVE,
    RPC_METHOD_MEMBERS_ASSIGN,
    RPC_METHOD_TRANSFER,
    RPC_METHOD_SNAPSHOT_TAKE,
    RPC_METHOD_BACKUP_OPEN,
    RPC_METHOD_BACKUP_READ,
    RPC_METHOD_BACKUP_CLOSE,
    RPC_METHOD_QUOTA_SET,
    RPC_METHOD_QUOTA_LIST,
    RPC_METHOD_SCHEMA_UPGRADE,
    RPC_METHOD_READ_INDEX,
    RPC_METHOD_CLAIM_BATCH,
};
/* Envelope.caller_cert: the DER of one certificate. */
#define RPC_CALLER_CERT_MAX (16u << 10)
#define RPC_METHOD_LAST     RPC_METHOD_CLAIM_BATCH
/* ClaimBatch: items per call, and the encoded request's bytes: with its
 * envelope (and a forwarded call's caller certificate, RPC_CALLER_CERT_MAX)
 * it fits FRAME_MAX_DEFAULT, so any node with the default limits can take
 * it and forward it. The answer is bounded by the same figure (the node
 * answers an item that would overflow it UNKNOWN: retried alone, with its
 * request id, it gets its answer in a smaller frame). */
#define RPC_CLAIM_BATCH_MAX       4096u
#define RPC_CLAIM_BATCH_BYTES_MAX (FRAME_MAX_DEFAULT - (32u << 10))

enum rpc_direction {
    RPC_REQUEST = 1,
    RPC_RESPONSE = 2,
};

enum rpc_status {
    RPC_STATUS_OK = 0,
    RPC_STATUS_UNKNOWN = 2,
    RPC_STATUS_INVALID_ARGUMENT = 3,
    RPC_STATUS_DEADLINE_EXCEEDED = 4,
    RPC_STATUS_PERMISSION_DENIED = 7,
    RPC_STATUS_RESOURCE_EXHAUSTED = 8,
    RPC_STATUS_FAILED_PRECONDITION = 9,
    RPC_STATUS_UNAVAILABLE = 14,
    RPC_STATUS_WRONG_GROUP = 100, /* docs/design.md §7, not sent yet */
    RPC_STATUS_MOVING = 101,      /* docs/design.md §7, not sent yet */
};

enum rpc_applied {
    RPC_APPLIED_UNSPECIFIED = 0, /* status OK, and requests */
    RPC_APPLIED_FALSE = 1,
    RPC_APPLIED_UNKNOWN = 2,
};

/* One envelope. Decoded: the pointers are owned by the view's arena and
 * valid until the next envelope_decode into it or envelope_view_close.
 * Built by hand for encoding: the pointers are borrowed, and the view needs
 * no envelope_view_init (encode reads the public fields only).
 *
 * Rules (checked by decode and encode alike):
 *   - method is a known enum rpc_method; UNSPECIFIED only in a response
 *     with a status other than OK (answer to a call that did not decode);
 *   - direction is REQUEST or RESPONSE; status and applied known values;
 *   - a request has status OK, applied UNSPECIFIED, no error, no hint;
 *   - only a request may be marked forwarded; caller_cert only in a
 *     forwarded request, 0..RPC_CALLER_CERT_MAX bytes;
 *   - status OK <=> applied UNSPECIFIED <=> error empty;
 *   - error 0..RPC_ERROR_MAX bytes, leader_hint 0..RPC_ADDR_MAX, no NUL;
 *   - deadline_ms 0..RPC_DEADLINE_MAX (0: none given);
 *   - cluster_id, boot_id: absent or 16 bytes;
 *   - the whole envelope fits the frame limit (so the body does). */
struct envelope_view
{
    uint64_t call_id;
    enum rpc_method method;
    enum rpc_direction direction;
    uint64_t deadline_ms;
    enum rpc_status status;
    enum rpc_applied applied;
    const char *error; /* NUL-terminated, error_len bytes; may be NULL if 0 */
    size_t error_len;
    const char *leader_hint; /* likewise */
    size_t leader_hint_len;
    bool has_cluster_id;
    uint8_t cluster_id[RPC_ID_LEN];
    uint64_t node_id;
    bool has_boot_id;
    uint8_t boot_id[RPC_ID_LEN];
    uint32_t group_id;
    const uint8_t *body; /* may be NULL if body_len is 0 */
    size_t body_len;
    bool forwarded; /* requests: a node forwarded it (one hop only) */
    /* Forwarded requests: DER of the original caller's certificate,
     * 0..RPC_CALLER_CERT_MAX bytes (may be NULL if 0). */
    const uint8_t *caller_cert;
    size_t caller_cert_len;

    /* Private to frame.c (decoding only); arena first: envelope_view_clear
     * zeroes what is before it. */
    struct arena arena;
    ProtobufCAllocator pb;
    size_t budget;
    size_t used;
    bool over_budget;
    bool nomem;
    char error_buf[RPC_ERROR_MAX + 1];
    char leader_hint_buf[RPC_ADDR_MAX + 1];
};

/* Parse a frame header from the @len bytes at @buf (borrowed). Returns 0 and
 * stores the envelope length in *out_len when 4 bytes are there; 1 when
 * fewer than 4 bytes are (nothing stored); RPC_E_EMPTY for a length of 0,
 * RPC_E_TOOBIG over @frame_max, RPC_E_LIMIT if @frame_max is 0 or over
 * FRAME_MAX_CEIL. Reads only the first 4 bytes. */
int frame_decode_header(const uint8_t *buf,
                        size_t len,
                        size_t frame_max,
                        uint32_t *out_len);

/* Write the header for an envelope of @env_len bytes into @out (4 bytes).
 * Returns 0, or RPC_E_EMPTY / RPC_E_TOOBIG / RPC_E_LIMIT as above (then
 * @out is untouched). */
int frame_encode_header(size_t env_len, size_t frame_max, uint8_t *out);

/* Prepare @v for decoding. Allocates nothing. */
void envelope_view_init(struct envelope_view *v);

/* Zero @v's public fields (call_id .. caller_cert_len): a view to encode,
 * which nothing of the decoding part is read for. It spares the ~1.1 KiB
 * of the private part (the error and hint buffers) a memset of the whole
 * struct clears: 170 instructions of every answer (bench/cpu/run). */
void envelope_view_clear(struct envelope_view *v);

/* Free the view's arena (what decoding kept). The struct is the caller's.
 * Chunks are otherwise kept for the next decode: a connection that decoded
 * one 1 MiB frame keeps 1 MiB until it closes its view. */
void envelope_view_close(struct envelope_view *v);

/* Decode and validate the envelope of @len bytes at @buf (borrowed; the
 * bytes after the frame header), allowing frames up to @frame_max. On
 * success fills *v and returns 0. On failure returns a negative RPC_E_*
 * and, if @errmsg (ERR_MSG_SIZE bytes) is not NULL, says which field and
 * why; *v's public fields are then unspecified. @v must have been
 * initialised with envelope_view_init. */
int envelope_decode(const uint8_t *buf,
                    size_t len,
                    size_t frame_max,
                    struct envelope_view *v,
                    char *errmsg);

/* Check @v against the rules above. 0 or a negative RPC_E_* and @errmsg. */
int envelope_check(const struct envelope_view *v, char *errmsg);

/* Encoded envelope size of @v (without the header). @v must pass
 * envelope_check. */
size_t envelope_packed_size(const struct envelope_view *v);

/* Encode @v (fields borrowed) as a whole frame, header included, into @buf
 * (caller's, @cap bytes). Stores the frame length in *out_len and returns 0;
 * RPC_E_NOSPACE if @cap is too small (*out_len is then the size needed and
 * @buf untouched); RPC_E_TOOBIG if the envelope is over @frame_max; an
 * envelope_check error if @v breaks a rule. Allocates nothing. */
int envelope_encode(const struct envelope_view *v,
                    size_t frame_max,
                    uint8_t *buf,
                    size_t cap,
                    size_t *out_len,
                    char *errmsg);

/* envelope_encode in two halves, for a caller that allocates the exact
 * size first (a send queue entry, a cork): envelope_frame_size validates
 * @v (envelope_check) and puts the length of its frame, header included,
 * in *need: 0, RPC_E_TOOBIG or an envelope_check error; it formats
 * @errmsg only on an error, so the size query of every answer costs no
 * printf. envelope_pack then writes that frame into @buf (at least @need
 * bytes) and returns @need; @v must be unchanged since, and @frame_max the
 * same (asserted: a mismatch is a bug of the caller). Allocate nothing. */
int envelope_frame_size(const struct envelope_view *v,
                        size_t frame_max,
                        size_t *need,
                        char *errmsg);
size_t envelope_pack(const struct envelope_view *v,
                     size_t frame_max,
                     uint8_t *buf,
                     size_t need);

/* Like envelope_encode, into a buffer malloc'd to the exact size. On
 * success *out is transferred to the caller (release it with free()); on
 * failure *out is NULL. RPC_E_NOMEM if malloc fails. */
int envelope_encode_alloc(const struct envelope_view *v,
                          size_t frame_max,
                          uint8_t **out,
                          size_t *out_len,
                          char *errmsg);

/* The protobuf-c descriptor of the body @method carries in @direction
 * (ClaimRequest, ClaimResponse, ...); NULL for RPC_METHOD_UNSPECIFIED or an
 * unknown value. Static, never freed. */
const ProtobufCMessageDescriptor *envelope_body_descriptor(
    enum rpc_method method,
    enum rpc_direction direction);

/* Unpack @v's body as the message envelope_body_descriptor names, through
 * @v's arena and budget (valid like the view's pointers). Returns 0 and the
 * message in *out, RPC_E_MALFORMED if it does not decode, RPC_E_BUDGET, or
 * RPC_E_ENUM for a method without a body type. Only for a view filled by
 * envelope_decode. Field bounds inside the body are the caller's to check. */
int envelope_unpack_body(struct envelope_view *v,
                         ProtobufCMessage **out,
                         char *errmsg);

/* The reader tables (common/pbwire.h) of the hand-written decoders that
 * envelope_decode and envelope_unpack_body try first: Once__Rpc__Envelope
 * and Once__Rpc__ClaimRequest. What they decline goes to protobuf-c.
 * Exposed for tests/fuzz/fuzz_codec.c, which compares them with protobuf-c. */
extern const struct pbr_spec envelope_pbr_spec;
extern const struct pbr_spec claim_request_pbr_spec;

/* The hand-written decoder of a ClaimBatchRequest, which envelope_unpack_body
 * tries first: its items, each read by claim_request_pbr_spec, into @out,
 * the item array and the items in one block from @pb (their byte fields
 * borrowed from @buf). protobuf-c's unpack of a 256-item batch was the
 * leader's largest cost per item (~1,800 instructions, callgrind,
 * bench/cpu/run --batch 256). Returns 0; 1 if declined: a field other than
 * items, an item the reader declines, no item or more than
 * RPC_CLAIM_BATCH_MAX, malformed bytes (a block taken is given back to
 * @pb); -1 if @pb fails. What it accepts protobuf-c
 * accepts with equal fields (tests/fuzz/fuzz_codec.c). */
int claim_batch_read(const uint8_t *buf,
                     size_t len,
                     ProtobufCAllocator *pb,
                     Once__Rpc__ClaimBatchRequest *out);

/* Names for logs and tests ("CLAIM", "UNAVAILABLE", "unknown" ...). */
const char *rpc_method_name(enum rpc_method m);
const char *rpc_status_name(enum rpc_status s);
const char *rpc_applied_name(enum rpc_applied a);
/* err_str(rv): the texts live in common/err.h's table. */
const char *rpc_strerror(int rv);

#endif /* ONCE_RPC_FRAME_H_ */
