#include "CPlatform.h"
#include <sys/prctl.h>

int cplatform_set_non_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int cplatform_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
