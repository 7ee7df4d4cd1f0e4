/* commands.h: the oomlab subcommands; each lives in its own cli/cmd_*.c and returns an exit code
 * (0 ok, 1 an expectation failed, 2 bad input or usage, 3 internal or device error). */
#ifndef OOMLAB_COMMANDS_H
#define OOMLAB_COMMANDS_H

int cmd_replay(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_program(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_check(int argc, char **argv);

#endif
