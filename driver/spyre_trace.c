// SPDX-License-Identifier: GPL-2.0-only
/*
 * Spyre DRM accel driver: the tracepoints of spyre_trace.h, defined here
 * once.
 */
#define CREATE_TRACE_POINTS
#include "spyre_trace.h"
