/* cmd_help.c: `oomlab help [COMMAND]`, `oomlab help --man` (the man page) and `oomlab help --completion
 * bash|zsh` (shell completion), all generated from the command table and each command's own --help text
 * and options, so they cannot drift apart. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"

void cmd_help_usage(FILE *f)
{
    size_t n;
    const struct command *t = command_table(&n);
    fprintf(f, "usage: oomlab COMMAND [ARGS]   (oomlab --version)\n\ncommands:\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-10s %s\n", t[i].name, t[i].summary);
    fprintf(f, "\n`oomlab COMMAND --help` describes a command; `oomlab help --man` prints the man page and\n"
               "`oomlab help --completion bash|zsh` a completion script.\n"
               "exit codes: 0 ok, 1 a job failed what it was asked, 2 bad input or usage, 3 internal or device "
               "error\n");
}

const struct option cmd_help_options[] = {
    {"man", no_argument, 0, 'm'}, {"completion", required_argument, 0, 'c'}, {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};

/* A command's usage text, captured. NULL without host memory. */
static char *usage_text(const struct command *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    c->usage(f);
    fclose(f);
    return text;
}

/* Text with troff's special characters escaped: a leading '.' or '\'', and every backslash. */
static void troff(FILE *out, const char *s)
{
    bool line_start = true;
    for (; *s; s++) {
        if (line_start && (*s == '.' || *s == '\''))
            fputs("\\&", out);
        if (*s == '\\')
            fputs("\\e", out);
        else if (*s == '-')
            fputs("\\-", out);
        else
            fputc(*s, out);
        line_start = *s == '\n';
    }
}

static int man_page(FILE *out)
{
    size_t n;
    const struct command *t = command_table(&n);
    fprintf(out, ".TH OOMLAB 1 \"\" \"oomlab %s\" \"User Commands\"\n", oomlab_version);
    fprintf(out, ".SH NAME\noomlab \\- reproduce GPU out-of-memory failures of deep-learning training, measure them, "
                 "and prove fixes\n");
    fprintf(out, ".SH SYNOPSIS\n.B oomlab\n.I COMMAND\n[\\fIARGS\\fR]\n");
    fprintf(out, ".SH DESCRIPTION\noomlab turns a training job (a YAML scenario), a PyTorch memory snapshot or a "
                 "text trace into the stream of tensor allocations, frees and kernels PyTorch would issue, runs it "
                 "through a rule-for-rule model of PyTorch's CUDA caching allocator on a simulated device, the "
                 "host, or a GPU, and reports peak memory, fragmentation, the OOM in PyTorch's words and "
                 "throughput, each figure labelled measured or modelled.\n");
    fprintf(out, ".SH COMMANDS\n");
    for (size_t i = 0; i < n; i++) {
        char *text = usage_text(&t[i]);
        if (!text)
            return -1;
        fprintf(out, ".SS %s\n%s\n.PP\n.nf\n", t[i].name, t[i].summary);
        troff(out, text);
        fprintf(out, ".fi\n");
        free(text);
    }
    fprintf(out, ".SH EXIT STATUS\n0 ok; 1 a job failed what it was asked (an expect:, fitting at all, a replay "
                 "without an OOM, a gate); 2 bad input or usage (the message names file:line:column); 3 internal "
                 "or device error.\n");
    fprintf(out, ".SH SEE ALSO\nREADME.md and docs/scenario-keys.md in the source tree.\n");
    return 0;
}

static void bash_completion(FILE *out)
{
    size_t n;
    const struct command *t = command_table(&n);
    fprintf(out, "# bash completion for oomlab (oomlab help --completion bash)\n_oomlab() {\n"
                 "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" opts=\"\"\n"
                 "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n        COMPREPLY=($(compgen -W \"");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s%s", i ? " " : "", t[i].name);
    fprintf(out, " --version --help\" -- \"$cur\"))\n        return\n    fi\n    case \"${COMP_WORDS[1]}\" in\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "    %s) opts=\"", t[i].name);
        for (const struct option *o = t[i].options; o->name; o++)
            fprintf(out, "%s--%s", o == t[i].options ? "" : " ", o->name);
        fprintf(out, "\" ;;\n");
    }
    fprintf(out, "    esac\n    if [[ \"$cur\" == -* ]]; then\n        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
                 "    else\n        COMPREPLY=($(compgen -f -- \"$cur\"))\n    fi\n}\n"
                 "complete -o filenames -F _oomlab oomlab\n");
}

static void zsh_completion(FILE *out)
{
    size_t n;
    const struct command *t = command_table(&n);
    fprintf(out, "#compdef oomlab\n# zsh completion for oomlab (oomlab help --completion zsh)\n_oomlab() {\n"
                 "    local -a commands\n    commands=(\n");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "        '%s:%s'\n", t[i].name, t[i].summary);
    fprintf(out, "    )\n    if (( CURRENT == 2 )); then\n        _describe 'command' commands\n        return\n    fi\n"
                 "    case $words[2] in\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "    %s) _arguments", t[i].name);
        for (const struct option *o = t[i].options; o->name; o++)
            fprintf(out, " '--%s%s'", o->name, o->has_arg == required_argument ? "=[value]:value:_files" : "");
        fprintf(out, " '*:file:_files' ;;\n");
    }
    fprintf(out, "    esac\n}\n_oomlab \"$@\"\n");
}

int cmd_help(int argc, char **argv)
{
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_help_options, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (man_page(stdout)) {
                fprintf(stderr, "oomlab help: out of host memory\n");
                return 3;
            }
            return 0;
        case 'c':
            if (!strcmp(optarg, "bash"))
                bash_completion(stdout);
            else if (!strcmp(optarg, "zsh"))
                zsh_completion(stdout);
            else {
                fprintf(stderr, "oomlab help: --completion %s: bash or zsh\n", optarg);
                return 2;
            }
            return 0;
        case 'h': cmd_help_usage(stdout); return 0;
        default: cmd_help_usage(stderr); return 2;
        }
    }
    if (optind == argc) {
        cmd_help_usage(stdout);
        return 0;
    }
    const struct command *cmd = command_find(argv[optind]);
    if (!cmd) {
        fprintf(stderr, "oomlab help: unknown command '%s'\n", argv[optind]);
        return 2;
    }
    cmd->usage(stdout);
    return 0;
}
