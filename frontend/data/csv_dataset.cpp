// data::CsvDataset (frontend/data/csv_dataset.h). Cells are parsed with
// std::from_chars (locale-independent, no exceptions); blank lines are
// skipped; spaces around a cell and a CR before the newline are ignored.
#include "frontend/data/csv_dataset.h"

#include <charconv>
#include <cmath>
#include <fstream>

#include "runtime/error.h"

namespace kiln::data {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line, char delimiter) {
  std::vector<std::string_view> cells;
  for (;;) {
    const size_t at = line.find(delimiter);
    cells.push_back(trim(line.substr(0, at)));
    if (at == std::string_view::npos) return cells;
    line.remove_prefix(at + 1);
  }
}

}  // namespace

CsvDataset::CsvDataset(const std::string& path, CsvOptions options) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "CsvDataset: cannot open '{}'", path);
  std::vector<double> values;
  std::vector<double> labels;
  int64_t columns = -1, label = -1;
  std::string line;
  int64_t lineNo = 0;
  bool first = true;
  while (std::getline(in, line)) {
    ++lineNo;
    if (trim(line).empty()) continue;
    const std::vector<std::string_view> cells = split(line, options.delimiter);
    const auto n = static_cast<int64_t>(cells.size());
    if (columns < 0) {
      columns = n;
      if (options.labelColumn) {
        label = *options.labelColumn < 0 ? *options.labelColumn + n : *options.labelColumn;
        KILN_CHECK(label >= 0 && label < n, "CsvDataset: {}:{}: label column {} of a row of {} columns", path, lineNo,
                   *options.labelColumn, n);
        KILN_CHECK(n >= 2, "CsvDataset: {}:{}: a label column and no feature column", path, lineNo);
      }
    }
    if (first && options.header) {
      first = false;
      for (std::string_view c : cells) names_.emplace_back(c);
      continue;
    }
    first = false;
    KILN_CHECK(n == columns, "CsvDataset: {}:{}: {} cells, expected {} as in the first row", path, lineNo, n, columns);
    for (int64_t c = 0; c < n; ++c) {
      const std::string_view cell = cells[static_cast<size_t>(c)];
      double v = 0;
      const char* end = cell.data() + cell.size();
      const auto [ptr, ec] = std::from_chars(cell.data(), end, v);
      KILN_CHECK(!cell.empty() && ec == std::errc() && ptr == end, "CsvDataset: {}:{}:{}: '{}' is not a number", path,
                 lineNo, c + 1, cell);
      if (c == label) {
        KILN_CHECK(isFloatingPoint(options.labelDtype) || std::trunc(v) == v,
                   "CsvDataset: {}:{}:{}: label '{}' is not an integer, and the label dtype is {}", path, lineNo, c + 1,
                   cell, dtypeName(options.labelDtype));
        labels.push_back(v);
      } else {
        values.push_back(v);
      }
    }
    ++rows_;
  }
  KILN_CHECK(!in.bad(), "CsvDataset: error reading '{}'", path);
  const int64_t features = columns < 0 ? 0 : columns - (label >= 0 ? 1 : 0);
  features_ = fromVector(values, {rows_, features}, Device::cpu()).to(options.dtype);
  if (label >= 0) labels_ = fromVector(labels, {rows_}, Device::cpu()).to(options.labelDtype);
}

Example CsvDataset::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < rows_, "CsvDataset: index {} is out of range for {} rows", index, rows_);
  if (labels_.defined()) return Example(features_.select(0, index), labels_.select(0, index));
  return Example{features_.select(0, index)};
}

}  // namespace kiln::data
