#pragma once
#include "mid/m.h"
#include "low/a.h"
