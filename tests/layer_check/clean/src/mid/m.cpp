#include "mid/m.h"
#include "m_local.h"
#  include "../low/b.h"
