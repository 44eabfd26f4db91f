/**
 * Abort reasons a driver gives a running call's signal beyond cancel and halt, and what the
 * kernel records for them. Must never: name a reason the kernel would record as anything
 * but what it says (a budget kill is not a cancel).
 */

/** The run's wall-clock budget ran out while the call ran: its processes were killed. */
export const WALL_BUDGET_REASON = "wall-budget";

/** The tool.result error of a call killed for the run's wall-clock budget. */
export const WALL_BUDGET_ERROR = {
  code: "ELIMIT_TIME",
  message: "the run's wall-clock budget ran out while this call ran; its processes were killed",
} as const;
