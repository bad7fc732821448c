// `@q/dashboard`: a web dashboard for q's job queue, request queues and quotas, as a Node request
// handler (`createDashboard`) and the `q-dashboard` command.
export { createDashboard, type Dashboard } from './dashboard.js';
export type { DashboardActions, DashboardOptions } from './options.js';
