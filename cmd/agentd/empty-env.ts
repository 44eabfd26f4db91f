/**
 * Imported first by main.ts, before anything that loads the AI SDK: an empty
 * OPENAI_BASE_URL (compose files and Kubernetes pass empty values) means "not set". The
 * SDK reads it while it loads and refuses an empty one, before agentd could say anything.
 */
if (process.env.OPENAI_BASE_URL === "") delete process.env.OPENAI_BASE_URL;
