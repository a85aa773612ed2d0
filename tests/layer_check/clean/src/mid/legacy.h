#pragma once
// The one known exception of the fixture's rules.
#include "top/t.h"
