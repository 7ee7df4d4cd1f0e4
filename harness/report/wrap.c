/* wrap.c: folding long lines (see wrap.h). */
#include "report/wrap.h"

#include <stdbool.h>
#include <string.h>

void wrap_keep_together(char *s)
{
    for (; *s; s++)
        if (*s == ' ')
            *s = WRAP_NBSP;
}

/* Writes n bytes of s, each WRAP_NBSP as a space. */
static void put_word(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fputc(s[i] == WRAP_NBSP ? ' ' : s[i], f);
}

void wrap_print(FILE *f, const char *first, int indent, const char *text)
{
    size_t head = strlen(first);
    while (head && first[head - 1] == ' ') /* its trailing spaces go out only if a word follows on this line */
        head--;
    int pad = (int)(strlen(first) - head); /* spaces before the first word, if it stays on this line */
    bool space = pad > 0;
    fwrite(first, 1, head, f);
    int col = (int)head;
    bool can_break = col > indent; /* a word too long for the first line may start the next */
    while (*text) {
        while (*text == ' ')
            text++;
        size_t word = strcspn(text, " ");
        if (!word)
            break;
        if ((space || can_break) && col + (space ? pad : 0) + (int)word > WRAP_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            space = false;
        }
        can_break = false;
        if (space) {
            fprintf(f, "%*s", pad, "");
            col += pad;
        }
        pad = 1;
        put_word(f, text, word);
        col += (int)word;
        space = true;
        text += word;
    }
    fputc('\n', f);
}
