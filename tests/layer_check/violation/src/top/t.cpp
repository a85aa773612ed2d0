#include "mid/m.h"
#include "../low/b.h"
