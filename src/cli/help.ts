import { Help, type Command as CommanderCommand } from 'commander';

/** An extra section of a command's help, laid out by commander like its options. */
export interface HelpSection {
  heading: string;
  rows: ReadonlyArray<readonly [term: string, description: string]>;
}

/**
 * Append `sections` (environment variables, exit codes) to `cmd`'s help, formatted by commander's
 * own item layout so they line up and wrap like the flags.
 */
export function addHelpSections(cmd: CommanderCommand, sections: readonly HelpSection[]): void {
  cmd.configureHelp({
    formatHelp(command, helper) {
      const base = Help.prototype.formatHelp.call(helper, command, helper);
      const extra = sections
        .filter((s) => s.rows.length > 0)
        .flatMap((s) => {
          const width = Math.max(...s.rows.map(([term]) => helper.displayWidth(term)));
          return helper.formatItemList(
            s.heading,
            s.rows.map(([term, text]) => helper.formatItem(term, width, text, helper)),
            helper,
          );
        });
      return extra.length === 0 ? base : `${base}\n${extra.join('\n')}`;
    },
  });
}
