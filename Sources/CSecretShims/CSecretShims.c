#include "CSecretShims.h"
