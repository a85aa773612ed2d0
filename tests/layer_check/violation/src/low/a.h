// Fixture: the lowest layer including a higher one (line 4).
#pragma once
#include <vector>
#include "mid/m.h"
