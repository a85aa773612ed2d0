// top/tool is a layer of its own (an executable's folder): it may include top but not mid.
#include "top/t.h"
