#pragma once
#include "low/a.h"  // listed; a comment with a ; in it
