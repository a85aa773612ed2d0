#pragma once
int b();  // a line with a ';' and an include after it: #include "top/t.h" is no directive
