// File: tools/ztier/usemem_report.h
//
// Every RegionStats counter as one JSON object (`ztier bench readahead`'s
// JSON, bench_readahead.cc; `ztier usemem` reports through bench_report.h).
//
// Thread safety: a plain function.
#ifndef ZTIER_TOOLS_ZTIER_USEMEM_REPORT_H_
#define ZTIER_TOOLS_ZTIER_USEMEM_REPORT_H_

#include "ztier/region.h"

namespace ztier::tool {

class JsonWriter;

// Writes the object where `w` expects a value.
void WriteRegionStatsJson(JsonWriter& w, const RegionStats& s);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_USEMEM_REPORT_H_
