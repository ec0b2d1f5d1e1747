/* common/addr.h: the one parser of IPv4 "IP:PORT" addresses.
 *
 * Every place that makes a socket address of one (onced's flags and
 * listeners, the Raft transport, the RPC channels, the member directory,
 * libonce, oncectl, once-bench, once-ingress's listeners) parses it here.
 * (once-ingress checks its flags with a rule of its own first, config.c.)
 *
 * The IP is what inet_pton(AF_INET) takes: four decimal numbers 0..255
 * without leading zeros ("127.0.0.1"; libraft 0.15 takes literals only). The
 * port is 1..65535 in every rule (no caller listens on, or connects to, an
 * ephemeral port 0); how it may be written is the rule the caller names,
 * because the callers grew up with different ones and each keeps the set of
 * strings it accepted:
 *
 *   ADDR_PORT_DIGITS     1 to 5 decimal digits, leading zeros allowed
 *                        ("07101"): the RPC ports, onced's flags, libonce;
 *   ADDR_PORT_CANONICAL  1 to 5 decimal digits, no leading zero: the
 *                        member directory of the fsm (addresses kept in the
 *                        replicated state, one spelling each);
 *   ADDR_PORT_ZEROS      decimal digits only, any number of leading zeros
 *                        ("0000007101"): oncectl and once-bench;
 *   ADDR_PORT_STRTOUL    as strtoul(3) reads it, leading white space and a
 *                        sign included (" 7101", "+7101"): the HTTP
 *                        listener, the Raft transport, once-ingress's
 *                        listeners.
 *
 * The IP ends at the last ':'. Lengths: the IP is at most ADDR_IP_MAX
 * characters; a limit on the whole string is the caller's (the buffers it
 * copies the address into). Reentrant, no allocation. */
#ifndef ONCE_COMMON_ADDR_H_
#define ONCE_COMMON_ADDR_H_

#include <stdbool.h>

#include <netinet/in.h>

/* "255.255.255.255" */
#define ADDR_IP_MAX 15

enum addr_port {
    ADDR_PORT_DIGITS,
    ADDR_PORT_CANONICAL,
    ADDR_PORT_ZEROS,
    ADDR_PORT_STRTOUL,
};

/* @s as "IP:PORT" with its port written by @rule: true, and the address in
 * *@out unless @out is NULL; false (*@out untouched) if @s is NULL or not
 * such an address. */
bool addr_parse_ipv4(const char *s,
                     enum addr_port rule,
                     struct sockaddr_in *out);

#endif /* ONCE_COMMON_ADDR_H_ */
