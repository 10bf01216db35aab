/** The memories the demo starts with, and what the scripted agent and the "Console" write. */
export const DEMO = {
  syncIntervalMs: 5_000,
  prefs: {
    name: 'User Preferences',
    memories: {
      '/tone.md': 'Keep answers short and friendly.\n',
      '/format/code-style.md': 'Use 2-space indentation.\n',
      '/scratch.md': 'Temporary note; safe to delete.\n',
    },
  },
  handbook: {
    name: 'Company Handbook',
    memories: {
      '/policies/expenses.md': 'Expenses above 500 EUR need a manager approval.\n',
      '/welcome.md': 'Welcome to the team!\n',
    },
  },
  newNote: '# Meeting notes\nThe user prefers examples in TypeScript.\n',
  agentEdit: 'Use 4-space indentation.\n',
  consoleEdit: 'Use tabs for indentation (edited in the Console).\n',
} as const;
