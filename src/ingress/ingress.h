/* ingress/ingress.h: once-ingress, a webhook receiver that cannot be
 * replayed (docs/ingress.md). */
#ifndef ONCE_INGRESS_INGRESS_H_
#define ONCE_INGRESS_INGRESS_H_

#include "common/err.h"

enum { ERR_INGRESS_CODES(ERR_ENUM) }; /* common/err.h */

#endif /* ONCE_INGRESS_INGRESS_H_ */
