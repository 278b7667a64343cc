// data::CsvDataset: a numeric CSV file as a data set. Each row is an
// example: its feature cells as an f32 vector and, with a label column, the
// label as a scalar (i64 by default, a class index for cross-entropy):
//
//   data::CsvDataset iris("iris.csv", {.header = true, .labelColumn = -1});
//   iris.get(0).data();    // f32[4]
//   iris.get(0).target();  // i64[]
//
// The file is read and parsed once, at construction, into one tensor per
// column group; get() returns views of a row. A cell that is not a number
// is an error naming the file, line and column ("iris.csv:7:3: 'x' is not
// a number"), and so is a row with a different number of cells.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/data/dataset.h"

namespace kiln::data {

struct CsvOptions {
  /// The first line names the columns.
  bool header = false;
  /// The column (0-based; negative counts from the end) holding the label;
  /// nullopt: every column is a feature and examples hold one tensor.
  std::optional<int64_t> labelColumn = std::nullopt;
  char delimiter = ',';
  DType dtype = DType::f32;       ///< of the features
  DType labelDtype = DType::i64;  ///< of the label; an integer dtype needs integral cells
};

class CsvDataset : public Dataset {
 public:
  explicit CsvDataset(const std::string& path, CsvOptions options = {});
  Example get(int64_t index) const override;
  int64_t size() const override { return rows_; }
  /// The header's names (empty without a header), the label's included.
  const std::vector<std::string>& columnNames() const { return names_; }
  /// [size(), features] and, with a label column, [size()].
  const Tensor& features() const { return features_; }
  const Tensor& labels() const { return labels_; }

 private:
  std::vector<std::string> names_;
  int64_t rows_ = 0;
  Tensor features_, labels_;
};

}  // namespace kiln::data
