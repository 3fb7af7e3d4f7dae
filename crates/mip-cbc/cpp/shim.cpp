// One C function over CbcModel: load a mixed-integer program in column form, run Cbc's branch
// and bound over Clp, and hand back the status, the point, the objective and the bound.
//
// CbcModel is used directly rather than through Cbc's C interface (`Cbc_solve`), because that
// goes through the command-line driver `CbcMain1`, which keeps its argument cursor in a global
// (`CbcOrClpRead_mode`) and installs signal handlers: two solves in two threads would race.
// Everything here lives in objects owned by the call, so pools can be solved in parallel.

#include <cmath>
#include <exception>

#include "CbcHeuristic.hpp"
#include "CbcHeuristicFPump.hpp"
#include "CbcHeuristicLocal.hpp"
#include "CbcHeuristicRINS.hpp"
#include "CbcModel.hpp"
#include "CglFlowCover.hpp"
#include "CglGomory.hpp"
#include "CglMixedIntegerRounding2.hpp"
#include "CglProbing.hpp"
#include "CoinMessageHandler.hpp"
#include "OsiClpSolverInterface.hpp"

// How far from a whole number an integer column may be and still count as whole (Cbc's own
// default integer tolerance is 1e-7 too).
static const double kIntegerTolerance = 1e-7;

extern "C" {

// Status codes, mirrored in src/lib.rs.
enum {
  GPUCAP_MIP_OPTIMAL = 0,
  GPUCAP_MIP_FEASIBLE = 1,
  GPUCAP_MIP_NO_SOLUTION = 2,
  GPUCAP_MIP_INFEASIBLE = 3,
  GPUCAP_MIP_ERROR = 4,
};

int gpucap_mip_cbc_solve(int num_cols, int num_rows, const int *col_start,
                         const int *row_index, const double *value,
                         const double *col_lower, const double *col_upper,
                         const double *objective, const double *row_lower,
                         const double *row_upper, const unsigned char *integer,
                         double rel_gap, double abs_gap, double time_limit,
                         int log_level, int cuts, double cutoff, int node_limit, const double *start, double *solution, double *objective_value,
                         double *bound) {
  try {
    OsiClpSolverInterface solver;
    solver.messageHandler()->setLogLevel(log_level > 0 ? 1 : 0);
    solver.getModelPtr()->setLogLevel(log_level > 0 ? 1 : 0);
    solver.loadProblem(num_cols, num_rows, col_start, row_index, value, col_lower,
                       col_upper, objective, row_lower, row_upper);
    solver.setObjSense(1.0);
    for (int c = 0; c < num_cols; ++c) {
      if (integer[c]) {
        solver.setInteger(c);
      }
    }
    CbcModel model(solver);
    model.setLogLevel(log_level > 0 ? 1 : 0);
    model.messageHandler()->setLogLevel(log_level > 0 ? 1 : 0);
    model.solver()->messageHandler()->setLogLevel(log_level > 0 ? 1 : 0);
    model.setAllowableFractionGap(rel_gap);
    model.setAllowableGap(abs_gap);
    model.setUseElapsedTime(true);
    if (time_limit > 0.0) {
      model.setMaximumSeconds(time_limit);
    }
    if (node_limit >= 0) {
      model.setMaximumNodes(node_limit);
    }
    if (cutoff < 1e30) {
      model.setCutoff(cutoff);
    }
    model.initialSolve();
    if (model.isProvenInfeasible() || model.solver()->isProvenPrimalInfeasible()) {
      return GPUCAP_MIP_INFEASIBLE;
    }
    if (cutoff < 1e30 && model.solver()->isDualObjectiveLimitReached()) {
      // The relaxation alone costs at least the cutoff: no cheaper plan exists.
      return GPUCAP_MIP_INFEASIBLE;
    }
    if (!model.solver()->isProvenOptimal()) {
      // The root relaxation stopped (time limit, numerical trouble) without an answer.
      return model.solver()->isIterationLimitReached() ? GPUCAP_MIP_NO_SOLUTION
                                                       : GPUCAP_MIP_ERROR;
    }
    {
      // A relaxation whose integer columns are already whole is the optimum, and its
      // objective the bound: branch and bound would only confirm it (and its set-up alone
      // costs as much as the root solve on this model).
      const double *x = model.solver()->getColSolution();
      bool whole = true;
      for (int c = 0; c < num_cols && whole; ++c) {
        if (integer[c]) whole = std::fabs(x[c] - std::floor(x[c] + 0.5)) <= kIntegerTolerance;
      }
      if (whole) {
        for (int c = 0; c < num_cols; ++c) {
          solution[c] = integer[c] ? std::floor(x[c] + 0.5) : x[c];
        }
        *objective_value = model.solver()->getObjValue();
        *bound = *objective_value;
        return GPUCAP_MIP_OPTIMAL;
      }
    }
    if (cuts) {
      // Fixed charges (a cost per purchase) leave the relaxation far from whole: cuts that
      // know fixed charges (flow cover, mixed-integer rounding) and probing close most of the
      // gap at the root, and the feasibility pump finds a good plan early. The model copies
      // each generator and heuristic.
      CglProbing probing;
      probing.setUsingObjective(1);
      model.addCutGenerator(&probing, -1, "Probing");
      CglFlowCover flow;
      model.addCutGenerator(&flow, -1, "FlowCover");
      CglMixedIntegerRounding2 rounding_cuts;
      model.addCutGenerator(&rounding_cuts, -1, "MixedIntegerRounding2");
      CglGomory gomory;
      model.addCutGenerator(&gomory, -1, "Gomory");
      CbcRounding rounding(model);
      model.addHeuristic(&rounding);
      CbcHeuristicFPump pump(model);
      model.addHeuristic(&pump);
    }
    if (start != nullptr) {
      // A known plan: branch and bound starts from it (it prunes every node that cannot beat
      // it), and the heuristics that search near a plan (RINS, local search) improve on it.
      double start_value = 0.0;
      for (int c = 0; c < num_cols; ++c) start_value += objective[c] * start[c];
      model.setBestSolution(start, num_cols, start_value, true);
      CbcHeuristicRINS rins(model);
      model.addHeuristic(&rins);
      CbcHeuristicLocal local(model);
      model.addHeuristic(&local);
      model.branchAndBound();
    } else {
      model.branchAndBound();
    }
    *bound = model.getBestPossibleObjValue();
    const double *best = model.bestSolution();
    if (model.isProvenInfeasible() && best == nullptr) {
      return GPUCAP_MIP_INFEASIBLE;
    }
    if (best == nullptr) {
      return GPUCAP_MIP_NO_SOLUTION;
    }
    for (int c = 0; c < num_cols; ++c) solution[c] = best[c];
    *objective_value = model.getObjValue();
    return model.isProvenOptimal() ? GPUCAP_MIP_OPTIMAL : GPUCAP_MIP_FEASIBLE;
  } catch (const CoinError &) {
    return GPUCAP_MIP_ERROR;
  } catch (const std::exception &) {
    return GPUCAP_MIP_ERROR;
  } catch (...) {
    return GPUCAP_MIP_ERROR;
  }
}

}  // extern "C"
