#pragma once
// CPU reference (double) for an EpilogueSpec applied to an accumulator matrix.
#include <vector>

#include "fusekit/epilogue.hpp"
#include "fusekit/reference/host_matrix.hpp"

namespace fusekit::reference {

struct EpilogueInputs {
  Matrix source;                  // AddSource
  std::vector<double> bias;       // ColumnBias
  std::vector<double> row_scale;  // RowScale
  std::vector<double> col_scale;  // ColumnScale
  Matrix residual;                // Residual
  double quant_scale = 1.0;       // QuantizeE4M3
};

struct EpilogueResult {
  Matrix out;        // [M, epilogue_output_columns(N)]
  Matrix aux;        // StoreAux: the chain's value at that node
  double amax = 0;   // QuantizeE4M3: max|x| before the scale
};

EpilogueResult apply_epilogue(const EpilogueSpec& spec, const Matrix& acc, const EpilogueInputs& in);

}  // namespace fusekit::reference
