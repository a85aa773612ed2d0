// Fixture: the lowest layer, including only itself and libraries.
#pragma once
#include <vector>
#include "low/b.h"
